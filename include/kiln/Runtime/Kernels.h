//===- Kernels.h - Host (CPU) kernels for kiln ops --------------*- C++ -*-===//
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

#include <utility>

namespace kiln::kernels {

/// table [V, D], ids [...] -> [..., D].
Tensor embedding(const Tensor &table, const Tensor &ids);
/// x [..., D], weight [D].
Tensor rmsNorm(const Tensor &x, const Tensor &weight, float eps);
/// x [..., K], weight [N, K] -> [..., N].
Tensor linear(const Tensor &x, const Tensor &weight);
/// [seq, 2 * headDim]: cos half then sin half.
Tensor ropeCache(double theta, int64_t seqLen, int64_t headDim);
/// x [b, s, heads, headDim], cache [s, 2 * headDim].
Tensor rope(const Tensor &x, const Tensor &cache);
/// The rotation rope applies, or (transpose) its transpose, which is rope's
/// vector-Jacobian product.
Tensor ropeRotate(const Tensor &x, const Tensor &cache, bool transpose);
/// q [b, s, h, d], k/v [b, s, hkv, d] -> (out [b, s, h, d], lse [b, h, s]).
std::pair<Tensor, Tensor> attention(const Tensor &q, const Tensor &k,
                                    const Tensor &v, bool causal, float scale);
Tensor swiglu(const Tensor &gate, const Tensor &up);
Tensor add(const Tensor &lhs, const Tensor &rhs);
/// logits [..., V], labels [...] -> f32 scalar mean cross-entropy.
Tensor crossEntropy(const Tensor &logits, const Tensor &labels);
/// tokens [b, s+1] -> (tokens[:, :-1], tokens[:, 1:]), same dtype.
std::pair<Tensor, Tensor> shiftLabels(const Tensor &tokens);

/// sum_j exp(row[j] - shift), also storing each term in `exps` if non-null.
double sumExp(const float *row, int64_t n, float shift, float *exps);

/// Throws kiln::Error naming `what` ("token id", "label"), the value and its
/// position if an element of `ids` is outside [0, limit).
void checkIds(const Tensor &ids, int64_t limit, const char *what);

/// Reads element i of an I64 or I32 tensor.
int64_t idAt(const Tensor &ids, int64_t i);

} // namespace kiln::kernels

#endif // KILN_RUNTIME_KERNELS_H
