//===- ForwardKernels.h - Host (CPU) kernels for kiln ops -------*- C++ -*-===//
//
// Reference-quality f32 kernels the CPU executor binds kiln ops to. Float
// inputs must be F32; id inputs I64 or I32. Shapes are assumed verified by the
// op (the IR verifier); data errors (an id outside the table) throw
// kiln::Error. GEMMs go through OpenBLAS.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_RUNTIME_KERNELS_H
#define KILN_RUNTIME_KERNELS_H

#include "kiln/Runtime/Tensor.h"
#include "kiln/Support/SequenceLayout.h"

#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

namespace kiln::kernels {

/// Product of all but the last dimension: the number of rows of a tensor
/// viewed as a [rows, last] matrix.
inline int64_t rowsOf(const Tensor &t) {
  return t.rank() == 0 ? 1 : t.numel() / t.shape().back();
}

inline Shape withLastDim(Shape shape, int64_t last) {
  shape.back() = last;
  return shape;
}

/// Ids [offset, offset + rows) of a vocabulary of `total` ids: the block one
/// rank holds under vocabulary parallelism. The default is the whole
/// vocabulary (of the tensor's size).
struct VocabShard {
  int64_t offset = 0;
  int64_t total = 0; ///< 0: the shard is the whole vocabulary
  bool holds(int64_t id, int64_t rows) const { return id >= offset && id < offset + rows; }
  int64_t limit(int64_t rows) const { return total ? total : rows; }
};

/// table [V, D], ids [...] -> [..., D]; with a shard, `table` holds its
/// rows and ids outside it give zero rows.
Tensor embedding(const Tensor &table, const Tensor &ids, VocabShard shard = {});
/// x [..., D], weight [D].
Tensor rmsNorm(const Tensor &x, const Tensor &weight, float eps);
/// x [..., K], weight [N, K] -> [..., N].
Tensor linear(const Tensor &x, const Tensor &weight);
/// [seq, 2 * headDim]: cos half then sin half.
Tensor ropeCache(double theta, int64_t seqLen, int64_t headDim);
/// The same table from given inverse frequencies (one per rotated pair);
/// row i for the true position of row i of `layout`.
Tensor ropeCache(const std::vector<float> &invFreq, int64_t seqLen, SequenceLayout layout = {});
/// x [b, s, heads, headDim], cache [s, 2 * headDim].
Tensor rope(const Tensor &x, const Tensor &cache);
/// The rotation rope applies, or (transpose) its transpose, which is rope's
/// vector-Jacobian product; x is [b, s, h, d], or [b, h, s, d] when
/// `headsFirst` (NKI's layout), with the same arithmetic per element.
Tensor ropeRotate(const Tensor &x, const Tensor &cache, bool transpose, bool headsFirst = false);
/// Which rows of the sequence an attention's queries are and where each row
/// stands, for the causal mask: q's rows start at `firstQuery` of k's
/// sequence (context parallelism's block), laid out as `layout` says.
struct AttentionBlock {
  int64_t firstQuery = 0;
  SequenceLayout layout;

  /// The true positions of the `queries` q rows and of k's `seq` rows.
  std::pair<std::vector<int64_t>, std::vector<int64_t>> positions(int64_t queries,
                                                                  int64_t seq) const {
    return {layout.positions(firstQuery, queries, seq), layout.positions(0, seq, seq)};
  }
};
/// q [b, s_q, h, d], k/v [b, s, hkv, d] -> (out [b, s_q, h, d], lse [b, h, s_q]);
/// causal: row i sees the keys whose true position is at most its own.
std::pair<Tensor, Tensor> attention(const Tensor &q, const Tensor &k, const Tensor &v, bool causal,
                                    float scale, const AttentionBlock &block = {});
Tensor swiglu(const Tensor &gate, const Tensor &up);
/// Writes into lhs's buffer when lhs is uniquely owned.
Tensor add(Tensor lhs, const Tensor &rhs);
/// Each element of the F32 tensor `x` rounded to `narrow` (BF16 or F16, round
/// to nearest even) and widened back to F32: mixed precision's casts with
/// float32 compute. Writes into x's buffer when x is uniquely owned.
Tensor roundTo(Tensor x, DType narrow);
/// `t` with dimension `dim` zero-padded at its end to `size` (pad) or cut to
/// its first `size` entries (narrow); any dtype.
Tensor padDim(const Tensor &t, int64_t dim, int64_t size);
Tensor narrowDim(const Tensor &t, int64_t dim, int64_t size);
/// `t` with its dimensions permuted: result dim i is t's dim perm[i]; any
/// dtype.
Tensor transpose(const Tensor &t, const std::vector<int64_t> &perm);
/// logits [..., V], labels [...] -> f32 scalar mean cross-entropy.
Tensor crossEntropy(const Tensor &logits, const Tensor &labels);

/// e^x for x <= 0 in single precision, relative error < 3e-7 (a few ulp), and
/// 0 from -87 down, where e^x is no longer a normal float. Branch-free so
/// that loops over it vectorize, unlike calls into libm; softmax arguments
/// are always <= 0.
inline float expNonPositive(float input) {
  // NaN fails every comparison: it computes on -87 (no undefined int
  // conversion) and is handed back as itself at the end.
  float x = input > -87.0f ? input : -87.0f;
  // x = n ln2 + r with |r| <= ln2/2 (Cody-Waite split of ln2), e^x = 2^n e^r.
  const float shifter = 12582912.0f; // 1.5 * 2^23: adding it rounds to integer
  float n = (x * 1.44269504088896341f + shifter) - shifter;
  float r = x - n * 0.693145751953125f - n * 1.428606765330187045e-6f;
  // Taylor series of e^r to r^6: truncation error r^7/7! < 1.3e-7 relative.
  float p = 1.0f + r * (1.0f + r * (0.5f + r * (1.0f / 6 + r * (1.0f / 24 +
                                   r * (1.0f / 120 + r * (1.0f / 720))))));
  uint32_t bits = uint32_t(int32_t(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return input > -87.0f ? p * scale : (input != input ? input : 0.0f);
}

/// sum_j exp(row[j] - shift), also storing each term in `exps` if non-null.
double sumExp(const float *row, int64_t n, float shift, float *exps);

/// Throws kiln::Error naming `what` ("token id", "label"), the value and its
/// position if an element of `ids` is outside [0, limit).
void checkIds(const Tensor &ids, int64_t limit, const char *what);

/// Reads element i of an I64 or I32 tensor.
int64_t idAt(const Tensor &ids, int64_t i);

} // namespace kiln::kernels

#endif // KILN_RUNTIME_KERNELS_H
