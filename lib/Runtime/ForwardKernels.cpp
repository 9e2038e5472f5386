//===- ForwardKernels.cpp - Host (CPU) kernels for kiln ops ---------------===//

#include "kiln/Runtime/ForwardKernels.h"
#include "kiln/Support/Error.h"
#include "kiln/Support/RopeFrequencies.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace kiln::kernels {


int64_t idAt(const Tensor &ids, int64_t i) {
  return ids.dtype() == DType::I64 ? ids.data<int64_t>()[i]
                                   : ids.data<int32_t>()[i];
}

Tensor embedding(const Tensor &table, const Tensor &ids, VocabShard shard) {
  int64_t rows = table.dim(0), dim = table.dim(1);
  Shape shape = ids.shape();
  shape.push_back(dim);
  Tensor out = Tensor::uninitialized(DType::F32, shape);
  const float *src = table.data<float>();
  float *dst = out.mutableData<float>();
  checkIds(ids, shard.limit(rows), "token id");
  for (int64_t i = 0, n = ids.numel(); i < n; ++i) {
    int64_t id = idAt(ids, i);
    if (shard.holds(id, rows))
      std::copy_n(src + (id - shard.offset) * dim, dim, dst + i * dim);
    else
      std::fill_n(dst + i * dim, dim, 0.0f);
  }
  return out;
}

Tensor rmsNorm(const Tensor &x, const Tensor &weight, float eps) {
  int64_t dim = x.shape().back(), rows = rowsOf(x);
  Tensor out = Tensor::uninitialized(DType::F32, x.shape());
  const float *in = x.data<float>(), *w = weight.data<float>();
  float *o = out.mutableData<float>();
  for (int64_t r = 0; r < rows; ++r) {
    const float *row = in + r * dim;
    double sumSq = 0;
    for (int64_t i = 0; i < dim; ++i)
      sumSq += double(row[i]) * row[i];
    float inv = 1.0f / std::sqrt(float(sumSq / dim) + eps);
    for (int64_t i = 0; i < dim; ++i)
      o[r * dim + i] = w[i] * (row[i] * inv);
  }
  return out;
}

Tensor linear(const Tensor &x, const Tensor &weight) {
  int64_t k = x.shape().back(), m = rowsOf(x), n = weight.dim(0);
  Tensor out = Tensor::uninitialized(DType::F32, withLastDim(x.shape(), n));
  // out[m, n] = x[m, k] * weight[n, k]^T
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1.0f,
              x.data<float>(), k, weight.data<float>(), k, 0.0f,
              out.mutableData<float>(), n);
  return out;
}

Tensor ropeCache(double theta, int64_t seqLen, int64_t headDim) {
  return ropeCache(ropeInverseFrequencies(theta, headDim), seqLen);
}

Tensor ropeCache(const std::vector<float> &invFreq, int64_t seqLen, SequenceLayout layout) {
  int64_t half = int64_t(invFreq.size()), headDim = 2 * half;
  Tensor cache(DType::F32, {seqLen, 2 * headDim});
  float *c = cache.mutableData<float>();
  for (int64_t i = 0; i < half; ++i) {
    // Same float32 arithmetic as the HF reference: inv_freq and pos * inv_freq
    // are float32 products before cos/sin.
    for (int64_t r = 0; r < seqLen; ++r) {
      float angle = float(layout.position(r, seqLen)) * invFreq[i];
      float cs = float(std::cos(double(angle)));
      float sn = float(std::sin(double(angle)));
      float *row = c + r * 2 * headDim;
      row[i] = row[i + half] = cs;
      row[headDim + i] = row[headDim + i + half] = sn;
    }
  }
  return cache;
}

Tensor ropeRotate(const Tensor &x, const Tensor &cache, bool transpose, bool headsFirst) {
  int64_t batch = x.dim(0), seq = x.dim(headsFirst ? 2 : 1), heads = x.dim(headsFirst ? 1 : 2),
          d = x.dim(3);
  int64_t half = d / 2;
  Tensor out = Tensor::uninitialized(DType::F32, x.shape());
  const float *in = x.data<float>(), *c = cache.data<float>();
  float *o = out.mutableData<float>();
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t s = 0; s < seq; ++s) {
      const float *cs = c + s * 2 * d, *sn = cs + d;
      for (int64_t h = 0; h < heads; ++h) {
        int64_t base = (headsFirst ? (b * heads + h) * seq + s : (b * seq + s) * heads + h) * d;
        const float *xi = in + base;
        float *xo = o + base;
        for (int64_t i = 0; i < half; ++i) {
          // Forward: x * cos + rotate_half(x) * sin with
          // rotate_half(x) = cat(-x[half:], x[:half]); the transpose (the
          // VJP) swaps and negates the two sine coefficients of each pair.
          float sinLo = transpose ? -sn[i + half] : sn[i];
          float sinHi = transpose ? -sn[i] : sn[i + half];
          xo[i] = xi[i] * cs[i] - xi[i + half] * sinLo;
          xo[i + half] = xi[i + half] * cs[i + half] + xi[i] * sinHi;
        }
      }
    }
  return out;
}

Tensor rope(const Tensor &x, const Tensor &cache) { return ropeRotate(x, cache, false); }

std::pair<Tensor, Tensor> attention(const Tensor &q, const Tensor &k, const Tensor &v, bool causal,
                                    float scale, const AttentionBlock &block) {
  int64_t batch = q.dim(0), seq = q.dim(1), keys = k.dim(1), heads = q.dim(2), d = q.dim(3);
  int64_t kvHeads = k.dim(2), group = heads / kvHeads;
  Tensor out = Tensor::uninitialized(DType::F32, q.shape());
  Tensor lse = Tensor::uninitialized(DType::F32, {batch, heads, seq});
  auto [queryPos, keyPos] = block.positions(seq, keys);
  std::vector<float> scores(seq * keys);
  const int64_t qStride = heads * d, kvStride = kvHeads * d;
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < heads; ++h) {
      int64_t kvh = h / group;
      const float *qp = q.data<float>() + b * seq * qStride + h * d;
      const float *kp = k.data<float>() + b * keys * kvStride + kvh * d;
      const float *vp = v.data<float>() + b * keys * kvStride + kvh * d;
      float *op = out.mutableData<float>() + b * seq * qStride + h * d;
      float *lp = lse.mutableData<float>() + (b * heads + h) * seq;
      // scores[i, j] = scale * q_i . k_j
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, seq, keys, d, scale, qp, qStride, kp,
                  kvStride, 0.0f, scores.data(), keys);
      for (int64_t i = 0; i < seq; ++i) {
        float *row = scores.data() + i * keys;
        auto visible = [&](int64_t j) { return !causal || keyPos[j] <= queryPos[i]; };
        float mx = -std::numeric_limits<float>::infinity();
        for (int64_t j = 0; j < keys; ++j)
          if (visible(j))
            mx = std::max(mx, row[j]);
        double sum = 0;
        for (int64_t j = 0; j < keys; ++j) {
          row[j] = visible(j) ? std::exp(row[j] - mx) : 0.0f;
          sum += row[j];
        }
        float inv = float(1.0 / sum);
        for (int64_t j = 0; j < keys; ++j)
          row[j] *= inv;
        lp[i] = mx + float(std::log(sum));
      }
      // out_i = sum_j p[i, j] v_j
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, seq, d, keys, 1.0f, scores.data(),
                  keys, vp, kvStride, 0.0f, op, qStride);
    }
  return {out, lse};
}

Tensor swiglu(const Tensor &gate, const Tensor &up) {
  Tensor out = Tensor::uninitialized(DType::F32, gate.shape());
  const float *g = gate.data<float>(), *u = up.data<float>();
  float *o = out.mutableData<float>();
  const int64_t n = gate.numel();
#pragma omp parallel for schedule(static) if (n > (1 << 16))
  for (int64_t i = 0; i < n; ++i)
    o[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
  return out;
}

Tensor roundTo(Tensor x, DType narrow) {
  if (narrow != DType::BF16 && narrow != DType::F16)
    fail("roundTo: {} is not a narrow float type (BF16, F16)", dtypeName(narrow));
  Tensor out = x.isUniquelyOwned() ? x : Tensor::uninitialized(DType::F32, x.shape());
  const float *in = x.data<float>();
  float *o = out.mutableData<float>();
  const int64_t n = x.numel();
  const bool bf16 = narrow == DType::BF16;
#pragma omp parallel for schedule(static) if (n > (1 << 16))
  for (int64_t i = 0; i < n; ++i)
    o[i] = bf16 ? bf16ToF32(f32ToBf16(in[i])) : f16ToF32(f32ToF16(in[i]));
  return out;
}

Tensor add(Tensor lhs, const Tensor &rhs) {
  Tensor out = lhs.isUniquelyOwned() ? lhs : Tensor::uninitialized(DType::F32, lhs.shape());
  const float *a = lhs.data<float>(), *b = rhs.data<float>();
  float *o = out.mutableData<float>();
  const int64_t n = lhs.numel();
#pragma omp parallel for schedule(static) if (n > (1 << 16))
  for (int64_t i = 0; i < n; ++i)
    o[i] = a[i] + b[i];
  return out;
}

double sumExp(const float *row, int64_t n, float shift, float *exps) {
  // Arguments are <= 0 after the shift, so each term is in [0, 1]; terms in
  // single precision (vectorized), the sum in double.
  double sum = 0;
  if (exps) {
#pragma omp simd reduction(+ : sum)
    for (int64_t j = 0; j < n; ++j) {
      exps[j] = expNonPositive(row[j] - shift);
      sum += exps[j];
    }
  } else {
#pragma omp simd reduction(+ : sum)
    for (int64_t j = 0; j < n; ++j)
      sum += expNonPositive(row[j] - shift);
  }
  return sum;
}

void checkIds(const Tensor &ids, int64_t limit, const char *what) {
  for (int64_t i = 0, n = ids.numel(); i < n; ++i) {
    int64_t id = idAt(ids, i);
    if (id < 0 || id >= limit)
      fail("{} {} at position {} is outside [0, {})", what, id, i, limit);
  }
}

Tensor crossEntropy(const Tensor &logits, const Tensor &labels) {
  int64_t vocab = logits.shape().back(), rows = rowsOf(logits);
  const float *l = logits.data<float>();
  checkIds(labels, vocab, "label");
  // Per-row losses in parallel, summed in order (thread-count independent).
  std::vector<double> rowLoss(rows);
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const float *row = l + r * vocab;
    float mx = *std::max_element(row, row + vocab);
    rowLoss[r] = mx + std::log(sumExp(row, vocab, mx, nullptr)) - row[idAt(labels, r)];
  }
  double total = 0;
  for (double loss : rowLoss)
    total += loss;
  Tensor loss(DType::F32, {});
  *loss.mutableData<float>() = float(total / rows);
  return loss;
}

namespace {
/// Copies the leading min(from, to) entries of `dim` of every outer slice.
Tensor resize(const Tensor &t, int64_t dim, int64_t size) {
  Shape shape = t.shape();
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < dim; ++i)
    outer *= shape[i];
  for (size_t i = dim + 1; i < shape.size(); ++i)
    inner *= shape[i];
  int64_t from = shape[dim], keep = std::min(from, size);
  shape[dim] = size;
  Tensor out(t.dtype(), shape); // zero-filled: the padding
  size_t elt = dtypeSize(t.dtype());
  const char *src = static_cast<const char *>(t.rawData());
  char *dst = out.mutableData<char>();
  for (int64_t o = 0; o < outer; ++o)
    std::memcpy(dst + o * size * inner * elt, src + o * from * inner * elt, keep * inner * elt);
  return out;
}
} // namespace

Tensor padDim(const Tensor &t, int64_t dim, int64_t size) { return resize(t, dim, size); }

Tensor transpose(const Tensor &t, const std::vector<int64_t> &perm) {
  const Shape &in = t.shape();
  int64_t rank = int64_t(in.size());
  Shape shape(rank);
  // Strides of t (in elements) reordered to follow the result's dimensions.
  std::vector<int64_t> inStride(rank, 1), stride(rank);
  for (int64_t d = rank - 2; d >= 0; --d)
    inStride[d] = inStride[d + 1] * in[d + 1];
  for (int64_t i = 0; i < rank; ++i) {
    shape[i] = in[perm[i]];
    stride[i] = inStride[perm[i]];
  }
  Tensor out = Tensor::uninitialized(t.dtype(), shape);
  size_t elt = dtypeSize(t.dtype());
  const char *src = static_cast<const char *>(t.rawData());
  char *dst = out.mutableData<char>();
  if (rank == 0 || t.numel() == 0) {
    std::memcpy(dst, src, t.numel() * elt);
    return out;
  }
  // Rows of the result's last dimension, each gathered with one stride; the
  // outer index is decoded per row, so rows go in parallel.
  int64_t inner = shape[rank - 1], rows = t.numel() / inner;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    int64_t rem = r, offset = 0;
    for (int64_t d = rank - 2; d >= 0; --d) {
      offset += (rem % shape[d]) * stride[d];
      rem /= shape[d];
    }
    char *row = dst + r * inner * elt;
    int64_t step = stride[rank - 1];
    if (step == 1) {
      std::memcpy(row, src + offset * elt, inner * elt);
    } else if (elt == 4) {
      auto *o = reinterpret_cast<uint32_t *>(row);
      for (int64_t i = 0; i < inner; ++i)
        std::memcpy(o + i, src + (offset + i * step) * 4, 4);
    } else {
      for (int64_t i = 0; i < inner; ++i)
        std::memcpy(row + i * elt, src + (offset + i * step) * elt, elt);
    }
  }
  return out;
}
Tensor narrowDim(const Tensor &t, int64_t dim, int64_t size) { return resize(t, dim, size); }

} // namespace kiln::kernels
