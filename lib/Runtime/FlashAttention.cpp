//===- FlashAttention.cpp - Tiled attention with online softmax -----------===//
//
// Forward: one task per (batch, head, query block). The block walks the key
// blocks it can see (under causal masking, none past its last query), keeping
// per row a running max m, a running sum l of exp(s - m) and an unnormalised
// output; each new key block rescales them by exp(m_old - m_new).
//
// Backward: one task per (batch, kv head). It owns dk/dv of that kv head and
// dq of every query head of the group, so each output element has a single
// writer and accumulates in a fixed order: deterministic, no atomics, and no
// second pass over the scores for dq (FlashAttention-2 instead splits dq from
// dk/dv across thread blocks). batch * kvHeads tasks is ample for CPU cores.
//
// The block products go through cblas_sgemm, which OpenBLAS's OpenMP build
// (the one Kiln links, Runtime/ThreadBudget.h) runs on the calling thread
// inside a parallel region.
//
//===----------------------------------------------------------------------===//

#include "kiln/Runtime/FlashAttention.h"
#include "kiln/Runtime/ForwardKernels.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

namespace kiln::kernels {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

struct Dims {
  int64_t batch, heads, kvHeads, seq, d, group;
  explicit Dims(const Tensor &q, const Tensor &k)
      : batch(q.dim(0)), heads(q.dim(1)), kvHeads(k.dim(1)), seq(q.dim(2)), d(q.dim(3)),
        group(q.dim(1) / k.dim(1)) {}
  /// Offset of row 0 of head `h` of batch `b` in a [b, heads, s, d] tensor.
  int64_t qOffset(int64_t b, int64_t h) const { return (b * heads + h) * seq * d; }
  int64_t kvOffset(int64_t b, int64_t g) const { return (b * kvHeads + g) * seq * d; }
};

/// A rows x cols block of scores (leading dimension ld) for queries from q0
/// and keys from k0: -inf where the key comes after the query. Only blocks
/// straddling the diagonal have anything to mask.
void maskFuture(float *scores, int64_t rows, int64_t cols, int64_t ld, int64_t q0, int64_t k0) {
  for (int64_t r = 0; r < rows; ++r) {
    int64_t firstMasked = std::max<int64_t>(0, q0 + r - k0 + 1);
    std::fill(scores + r * ld + std::min(firstMasked, cols), scores + r * ld + cols, kNegInf);
  }
}

/// C[m, n] (ldc) = alpha * A B^T + beta * C, A [m, k] and B [n, k] row-major.
void gemmNT(int64_t m, int64_t n, int64_t k, float alpha, const float *a, int64_t lda,
            const float *b, int64_t ldb, float beta, float *c, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, alpha, a, lda, b, ldb, beta,
              c, ldc);
}
/// C = alpha * A B + beta * C, A [m, k], B [k, n].
void gemmNN(int64_t m, int64_t n, int64_t k, float alpha, const float *a, int64_t lda,
            const float *b, int64_t ldb, float beta, float *c, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, alpha, a, lda, b, ldb, beta,
              c, ldc);
}
/// C = alpha * A^T B + beta * C, A [k, m], B [k, n].
void gemmTN(int64_t m, int64_t n, int64_t k, float alpha, const float *a, int64_t lda,
            const float *b, int64_t ldb, float beta, float *c, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, m, n, k, alpha, a, lda, b, ldb, beta,
              c, ldc);
}

} // namespace

std::pair<Tensor, Tensor> flashAttention(const Tensor &q, const Tensor &k, const Tensor &v,
                                         bool causal, float scale, FlashBlocks blocks) {
  const Dims dims(q, k);
  const int64_t S = dims.seq, D = dims.d, Br = blocks.queries, Bc = blocks.keys;
  Tensor out = Tensor::uninitialized(DType::F32, q.shape());
  Tensor lse = Tensor::uninitialized(DType::F32, {dims.batch, dims.heads, S});
  const int64_t qBlocks = (S + Br - 1) / Br, tasks = dims.batch * dims.heads * qBlocks;
#pragma omp parallel
  {
    std::vector<float> scores(Br * Bc), acc(Br * D), rowMax(Br);
    std::vector<double> rowSum(Br);
    // Causal blocks near the end of the sequence see more keys: dynamic.
#pragma omp for schedule(dynamic)
    for (int64_t task = 0; task < tasks; ++task) {
      const int64_t bh = task / qBlocks, b = bh / dims.heads, h = bh % dims.heads;
      const int64_t q0 = (task % qBlocks) * Br, rows = std::min(Br, S - q0);
      const int64_t qOff = dims.qOffset(b, h) + q0 * D;
      const float *Q = q.data<float>() + qOff;
      const int64_t kvOff = dims.kvOffset(b, h / dims.group);
      const float *K = k.data<float>() + kvOff, *V = v.data<float>() + kvOff;
      std::fill_n(acc.begin(), rows * D, 0.0f);
      std::fill_n(rowMax.begin(), rows, kNegInf);
      std::fill_n(rowSum.begin(), rows, 0.0);
      // Keys after the block's last query are masked for every row: skipped.
      const int64_t keyEnd = causal ? q0 + rows : S;
      for (int64_t k0 = 0; k0 < keyEnd; k0 += Bc) {
        const int64_t cols = std::min(Bc, keyEnd - k0);
        gemmNT(rows, cols, D, scale, Q, D, K + k0 * D, D, 0.0f, scores.data(), Bc);
        if (causal && k0 + cols - 1 > q0)
          maskFuture(scores.data(), rows, cols, Bc, q0, k0);
        for (int64_t r = 0; r < rows; ++r) {
          float *row = scores.data() + r * Bc;
          // Finite: key 0 of the first block is visible to every query.
          float mx = std::max(rowMax[r], *std::max_element(row, row + cols));
          float alpha = expNonPositive(rowMax[r] - mx); // 0 on the first block
          rowSum[r] = rowSum[r] * alpha + sumExp(row, cols, mx, row);
          rowMax[r] = mx;
          if (alpha != 1.0f)
            for (float *a = acc.data() + r * D, *end = a + D; a != end; ++a)
              *a *= alpha;
        }
        gemmNN(rows, D, cols, 1.0f, scores.data(), Bc, V + k0 * D, D, 1.0f, acc.data(), D);
      }
      float *O = out.mutableData<float>() + qOff;
      float *L = lse.mutableData<float>() + (b * dims.heads + h) * S + q0;
      for (int64_t r = 0; r < rows; ++r) {
        float inv = float(1.0 / rowSum[r]);
        for (int64_t e = 0; e < D; ++e)
          O[r * D + e] = acc[r * D + e] * inv;
        L[r] = rowMax[r] + float(std::log(rowSum[r]));
      }
    }
  }
  return {out, lse};
}

std::tuple<Tensor, Tensor, Tensor>
flashAttentionBackward(const Tensor &dout, const Tensor &q, const Tensor &k, const Tensor &v,
                       const Tensor &out, const Tensor &lse, bool causal, float scale,
                       FlashBlocks blocks) {
  const Dims dims(q, k);
  const int64_t S = dims.seq, D = dims.d, Br = blocks.queries, Bc = blocks.keys;
  // Zero-filled: every block product accumulates (beta = 1) into them.
  Tensor dq(DType::F32, q.shape()), dk(DType::F32, k.shape()), dv(DType::F32, v.shape());
  const int64_t tasks = dims.batch * dims.kvHeads;
#pragma omp parallel
  {
    std::vector<float> p(Br * Bc), ds(Br * Bc), rowDot(S);
#pragma omp for schedule(dynamic)
    for (int64_t task = 0; task < tasks; ++task) {
      const int64_t b = task / dims.kvHeads, g = task % dims.kvHeads;
      const int64_t kvOff = dims.kvOffset(b, g);
      const float *K = k.data<float>() + kvOff, *V = v.data<float>() + kvOff;
      float *dK = dk.mutableData<float>() + kvOff, *dV = dv.mutableData<float>() + kvOff;
      for (int64_t h = g * dims.group; h < (g + 1) * dims.group; ++h) {
        const int64_t qOff = dims.qOffset(b, h);
        const float *Q = q.data<float>() + qOff, *O = out.data<float>() + qOff,
                    *dO = dout.data<float>() + qOff;
        const float *L = lse.data<float>() + (b * dims.heads + h) * S;
        float *dQ = dq.mutableData<float>() + qOff;
        // D_i = dO_i . O_i (= sum_j P_ij dP_ij), in double as attentionBackward.
        for (int64_t i = 0; i < S; ++i) {
          double dot = 0;
          for (int64_t e = 0; e < D; ++e)
            dot += double(dO[i * D + e]) * O[i * D + e];
          rowDot[i] = float(dot);
        }
        for (int64_t k0 = 0; k0 < S; k0 += Bc) {
          const int64_t cols = std::min(Bc, S - k0);
          const float *Kj = K + k0 * D, *Vj = V + k0 * D;
          float *dKj = dK + k0 * D, *dVj = dV + k0 * D;
          // Queries before the key block see none of it: start at k0.
          for (int64_t q0 = causal ? k0 : 0; q0 < S; q0 += Br) {
            const int64_t rows = std::min(Br, S - q0);
            const float *Qi = Q + q0 * D, *dOi = dO + q0 * D;
            // P = exp(scale Q K^T - lse), masked entries exp(-inf) = 0.
            gemmNT(rows, cols, D, scale, Qi, D, Kj, D, 0.0f, p.data(), Bc);
            if (causal && k0 + cols - 1 > q0)
              maskFuture(p.data(), rows, cols, Bc, q0, k0);
            for (int64_t r = 0; r < rows; ++r) {
              float *row = p.data() + r * Bc;
              const float shift = L[q0 + r];
#pragma omp simd
              for (int64_t c = 0; c < cols; ++c)
                row[c] = expNonPositive(row[c] - shift);
            }
            // dV += P^T dO; dP = dO V^T; dS = P * (dP - D_i).
            gemmTN(cols, D, rows, 1.0f, p.data(), Bc, dOi, D, 1.0f, dVj, D);
            gemmNT(rows, cols, D, 1.0f, dOi, D, Vj, D, 0.0f, ds.data(), Bc);
            for (int64_t r = 0; r < rows; ++r) {
              float *dsRow = ds.data() + r * Bc;
              const float *pRow = p.data() + r * Bc, di = rowDot[q0 + r];
#pragma omp simd
              for (int64_t c = 0; c < cols; ++c)
                dsRow[c] = pRow[c] * (dsRow[c] - di);
            }
            // dK += scale dS^T Q; dQ += scale dS K.
            gemmTN(cols, D, rows, scale, ds.data(), Bc, Qi, D, 1.0f, dKj, D);
            gemmNN(rows, D, cols, scale, ds.data(), Bc, Kj, D, 1.0f, dQ + q0 * D, D);
          }
        }
      }
    }
  }
  return {dq, dk, dv};
}

} // namespace kiln::kernels
