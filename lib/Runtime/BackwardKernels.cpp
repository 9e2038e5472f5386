//===- BackwardKernels.cpp - Host kernels for gradients and AdamW ---------===//

#include "kiln/Runtime/BackwardKernels.h"
#include "kiln/Runtime/ForwardKernels.h"
#include "kiln/Support/Error.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>

namespace kiln::kernels {

Tensor embeddingBackward(const Tensor &grad, const Tensor &ids, int64_t vocab,
                         VocabShard shard) {
  int64_t dim = grad.shape().back();
  Tensor dtable(DType::F32, {vocab, dim});
  const float *g = grad.data<float>();
  float *dt = dtable.mutableData<float>();
  checkIds(ids, shard.limit(vocab), "token id");
  for (int64_t i = 0, n = ids.numel(); i < n; ++i) {
    int64_t id = idAt(ids, i);
    if (!shard.holds(id, vocab))
      continue;
    // Repeated ids accumulate: each occurrence contributes its own gradient.
    for (int64_t j = 0; j < dim; ++j)
      dt[(id - shard.offset) * dim + j] += g[i * dim + j];
  }
  return dtable;
}

std::pair<Tensor, Tensor> rmsNormBackward(const Tensor &grad, const Tensor &x,
                                          const Tensor &weight, float eps) {
  int64_t dim = x.shape().back(), rows = rowsOf(x);
  Tensor dx = Tensor::uninitialized(DType::F32, x.shape());
  Tensor dw = Tensor::uninitialized(DType::F32, weight.shape());
  const float *in = x.data<float>(), *w = weight.data<float>(),
              *dy = grad.data<float>();
  float *dxp = dx.mutableData<float>();
  std::vector<double> dwAcc(dim, 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    const float *xr = in + r * dim, *gr = dy + r * dim;
    double sumSq = 0, dot = 0; // dot = sum_j (dy_j w_j) x_j
    for (int64_t i = 0; i < dim; ++i) {
      sumSq += double(xr[i]) * xr[i];
      dot += double(gr[i]) * w[i] * xr[i];
    }
    double inv = 1.0 / std::sqrt(sumSq / dim + eps);
    // d inv / d x_i = -inv^3 x_i / dim, hence the second term.
    double coef = inv * inv * inv * dot / dim;
    for (int64_t i = 0; i < dim; ++i) {
      dxp[r * dim + i] = float(inv * gr[i] * w[i] - coef * xr[i]);
      dwAcc[i] += double(gr[i]) * xr[i] * inv;
    }
  }
  std::copy(dwAcc.begin(), dwAcc.end(), dw.mutableData<float>());
  return {dx, dw};
}

Tensor linearBackwardData(const Tensor &grad, const Tensor &weight) {
  int64_t n = grad.shape().back(), m = rowsOf(grad), k = weight.dim(1);
  Shape shape = grad.shape();
  shape.back() = k;
  Tensor dx = Tensor::uninitialized(DType::F32, shape);
  // dx[m, k] = grad[m, n] * weight[n, k]
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, k, n, 1.0f,
              grad.data<float>(), n, weight.data<float>(), k, 0.0f,
              dx.mutableData<float>(), k);
  return dx;
}

Tensor linearBackwardWeight(const Tensor &grad, const Tensor &x) {
  int64_t n = grad.shape().back(), m = rowsOf(grad), k = x.shape().back();
  Tensor dw = Tensor::uninitialized(DType::F32, {n, k});
  // dw[n, k] = grad[m, n]^T * x[m, k]
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, n, k, m, 1.0f,
              grad.data<float>(), n, x.data<float>(), k, 0.0f,
              dw.mutableData<float>(), k);
  return dw;
}

Tensor ropeBackward(const Tensor &grad, const Tensor &cache) {
  return ropeRotate(grad, cache, /*transpose=*/true);
}

std::tuple<Tensor, Tensor, Tensor> attentionBackward(const Tensor &dout, const Tensor &q,
                                                     const Tensor &k, const Tensor &v,
                                                     const Tensor &out, const Tensor &lse,
                                                     bool causal, float scale,
                                                     const AttentionBlock &block) {
  int64_t batch = q.dim(0), seq = q.dim(1), keys = k.dim(1), heads = q.dim(2), d = q.dim(3);
  int64_t kvHeads = k.dim(2), group = heads / kvHeads;
  Tensor dq(DType::F32, q.shape()), dk(DType::F32, k.shape()),
      dv(DType::F32, v.shape());
  auto [queryPos, keyPos] = block.positions(seq, keys);
  std::vector<float> p(seq * keys), dp(seq * keys);
  const int64_t qStride = heads * d, kvStride = kvHeads * d;
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < heads; ++h) {
      int64_t kvh = h / group;
      int64_t qOff = b * seq * qStride + h * d, kvOff = b * keys * kvStride + kvh * d;
      const float *qp = q.data<float>() + qOff, *op = out.data<float>() + qOff,
                  *dop = dout.data<float>() + qOff;
      const float *kp = k.data<float>() + kvOff, *vp = v.data<float>() + kvOff;
      const float *lp = lse.data<float>() + (b * heads + h) * seq;
      // Recompute the probabilities from the saved log-sum-exp instead of
      // storing the [s, s] matrix in the forward.
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, seq, keys, d, scale, qp, qStride, kp,
                  kvStride, 0.0f, p.data(), keys);
      for (int64_t i = 0; i < seq; ++i) {
        float *row = p.data() + i * keys;
        for (int64_t j = 0; j < keys; ++j)
          row[j] = !causal || keyPos[j] <= queryPos[i] ? std::exp(row[j] - lp[i]) : 0.0f;
      }
      // dV += P^T dO (beta = 1: query heads of a group share this kv head).
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, keys, d, seq, 1.0f, p.data(), keys, dop,
                  qStride, 1.0f, dv.mutableData<float>() + kvOff, kvStride);
      // dP = dO V^T
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, seq, keys, d, 1.0f, dop, qStride, vp,
                  kvStride, 0.0f, dp.data(), keys);
      // dS = P * (dP - D_i) with D_i = dO_i . O_i (= sum_j P_ij dP_ij); dS
      // overwrites dP. Masked entries have P = 0, so dS = 0 there.
      for (int64_t i = 0; i < seq; ++i) {
        double di = 0;
        for (int64_t e = 0; e < d; ++e)
          di += double(dop[i * qStride + e]) * op[i * qStride + e];
        for (int64_t j = 0; j < keys; ++j)
          dp[i * keys + j] = p[i * keys + j] * (dp[i * keys + j] - float(di));
      }
      // dQ = scale * dS K; dK += scale * dS^T Q.
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, seq, d, keys, scale, dp.data(), keys,
                  kp, kvStride, 0.0f, dq.mutableData<float>() + qOff, qStride);
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, keys, d, seq, scale, dp.data(), keys, qp,
                  qStride, 1.0f, dk.mutableData<float>() + kvOff, kvStride);
    }
  return {dq, dk, dv};
}

std::pair<Tensor, Tensor> swigluBackward(const Tensor &dout, const Tensor &gate,
                                         const Tensor &up) {
  Tensor dgate = Tensor::uninitialized(DType::F32, gate.shape());
  Tensor dup = Tensor::uninitialized(DType::F32, up.shape());
  const float *dy = dout.data<float>(), *g = gate.data<float>(),
              *u = up.data<float>();
  float *dg = dgate.mutableData<float>(), *du = dup.mutableData<float>();
  for (int64_t i = 0, n = gate.numel(); i < n; ++i) {
    float sig = 1.0f / (1.0f + std::exp(-g[i]));
    du[i] = dy[i] * g[i] * sig;
    // silu'(g) = sig * (1 + g * (1 - sig))
    dg[i] = dy[i] * u[i] * sig * (1.0f + g[i] * (1.0f - sig));
  }
  return {dgate, dup};
}

Tensor crossEntropyBackward(const Tensor &logits, const Tensor &labels,
                            const Tensor &dloss) {
  int64_t vocab = logits.shape().back(), rows = labels.numel();
  Tensor dlogits = Tensor::uninitialized(DType::F32, logits.shape());
  const float *l = logits.data<float>();
  float *dl = dlogits.mutableData<float>();
  // The forward is a mean over rows, so each row's gradient carries 1/rows.
  double factor = double(*dloss.data<float>()) / rows;
  checkIds(labels, vocab, "label");
  // Rows are independent: one thread each (no exceptions past this point).
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const float *row = l + r * vocab;
    int64_t label = idAt(labels, r);
    float *out = dl + r * vocab;
    float mx = *std::max_element(row, row + vocab);
    // softmax = exp(row - max) / sum: one exp per element, kept in `out`.
    float scale = float(factor / sumExp(row, vocab, mx, out));
#pragma omp simd
    for (int64_t j = 0; j < vocab; ++j)
      out[j] *= scale;
    out[label] -= float(factor);
  }
  return dlogits;
}

double sumOfSquares(const std::vector<Tensor> &tensors) {
  // Fixed-size chunks summed in parallel, then added in order: the result
  // does not depend on the number of threads.
  constexpr int64_t kChunk = int64_t(1) << 20;
  double sumSq = 0;
  for (const Tensor &t : tensors) {
    const float *p = t.data<float>();
    int64_t n = t.numel(), chunks = (n + kChunk - 1) / kChunk;
    std::vector<double> partial(chunks, 0.0);
#pragma omp parallel for schedule(static) if (chunks > 1)
    for (int64_t c = 0; c < chunks; ++c)
      for (int64_t i = c * kChunk, end = std::min(n, i + kChunk); i < end; ++i)
        partial[c] += double(p[i]) * p[i];
    for (double s : partial)
      sumSq += s;
  }
  return sumSq;
}

Tensor globalNorm(const std::vector<Tensor> &tensors) {
  Tensor norm(DType::F32, {});
  *norm.mutableData<float>() = float(std::sqrt(sumOfSquares(tensors)));
  return norm;
}

std::tuple<Tensor, Tensor, Tensor> adamw(Tensor param, const Tensor &grad, Tensor m,
                                         Tensor v, const AdamWHyper &hyper) {
  // Each element is read before it is written, so a dead input's buffer can
  // take the output.
  auto output = [](const Tensor &in) {
    return in.isUniquelyOwned() ? in : Tensor::uninitialized(DType::F32, in.shape());
  };
  Tensor pOut = output(param), mOut = output(m), vOut = output(v);
  // Scalars in double, then rounded to float once, as torch does when a
  // Python float multiplies a float32 tensor; elementwise math in float so the
  // result tracks torch's float32 AdamW bit-for-bit in the common case.
  double bc1 = 1.0 - std::pow(hyper.beta1, double(hyper.step));
  double bc2 = 1.0 - std::pow(hyper.beta2, double(hyper.step));
  const float decay = float(1.0 - hyper.lr * hyper.weightDecay);
  const float w1 = float(1.0 - hyper.beta1), beta2 = float(hyper.beta2),
              w2 = float(1.0 - hyper.beta2);
  const float stepSize = float(hyper.lr / bc1), bc2Sqrt = float(std::sqrt(bc2));
  const float eps = float(hyper.eps), gradScale = float(hyper.gradScale);
  const float *p0 = param.data<float>(), *g0 = grad.data<float>(),
              *m0 = m.data<float>(), *v0 = v.data<float>();
  float *p = pOut.mutableData<float>(), *mo = mOut.mutableData<float>(),
        *vo = vOut.mutableData<float>();
  const int64_t n = param.numel();
#pragma omp parallel for schedule(static) if (n > (1 << 16))
  for (int64_t i = 0; i < n; ++i) {
    float g = g0[i] * gradScale;
    // torch.lerp picks the formula by weight to stay exact at both ends.
    float mi = w1 < 0.5f ? m0[i] + w1 * (g - m0[i]) : g - (g - m0[i]) * (1.0f - w1);
    float vi = v0[i] * beta2 + w2 * g * g;
    float denom = std::sqrt(vi) / bc2Sqrt + eps;
    p[i] = p0[i] * decay - stepSize * (mi / denom);
    mo[i] = mi;
    vo[i] = vi;
  }
  return {pOut, mOut, vOut};
}

} // namespace kiln::kernels
