//===- ChunkedCrossEntropy.cpp - Fused output projection + loss -----------===//
//
// Per chunk of rows: logits = h_c W^T (sgemm), then per row (OpenMP) the
// loss lse - logit[label] and, in place, dlogits = (softmax - onehot) / N,
// then gradH_c = dlogits W and gradW += dlogits^T h_c. The arithmetic per row
// is crossEntropy's and crossEntropyBackward's; GEMMs thread inside OpenBLAS.
//
//===----------------------------------------------------------------------===//

#include "kiln/Runtime/ChunkedCrossEntropy.h"
#include "kiln/Runtime/ForwardKernels.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <vector>

namespace kiln::kernels {

namespace {

/// t * factor, in t's buffer when nothing else refers to it.
Tensor scaled(Tensor t, float factor) {
  Tensor out = t.isUniquelyOwned() ? t : Tensor::uninitialized(DType::F32, t.shape());
  const float *in = t.data<float>();
  float *o = out.mutableData<float>();
  const int64_t n = t.numel();
#pragma omp parallel for schedule(static) if (n > (1 << 16))
  for (int64_t i = 0; i < n; ++i)
    o[i] = in[i] * factor;
  return out;
}

} // namespace

int64_t resolveChunkRows(int64_t rows, int64_t chunkRows) {
  return std::max<int64_t>(1, std::min(chunkRows > 0 ? chunkRows : kDefaultChunkRows, rows));
}

int64_t chunkedCrossEntropyScratchBytes(int64_t rows, int64_t vocab, int64_t chunkRows) {
  return resolveChunkRows(rows, chunkRows) * vocab * int64_t(sizeof(float)) +
         rows * int64_t(sizeof(double));
}

ChunkedCrossEntropyResult chunkedCrossEntropy(const Tensor &h, const Tensor &weight,
                                              const Tensor &labels,
                                              std::optional<int64_t> totalPositions,
                                              int64_t chunkRows) {
  const int64_t hidden = h.shape().back(), rows = rowsOf(h), vocab = weight.dim(0);
  checkIds(labels, vocab, "label");
  const int64_t chunk = resolveChunkRows(rows, chunkRows);
  // The loss is a mean: every row's gradient carries 1 / (count of positions).
  const double count = double(totalPositions ? *totalPositions : rows), factor = 1.0 / count;
  Tensor gradH = Tensor::uninitialized(DType::F32, h.shape());
  // Zeroed only if no chunk writes it (the first chunk's GEMM has beta = 0).
  Tensor gradW = rows == 0 ? Tensor(DType::F32, weight.shape())
                           : Tensor::uninitialized(DType::F32, weight.shape());
  const float *H = h.data<float>(), *W = weight.data<float>();
  float *dH = gradH.mutableData<float>(), *dW = gradW.mutableData<float>();
  std::unique_ptr<float[]> logits(new float[chunk * vocab]); // overwritten by the GEMM
  std::vector<double> rowLoss(rows);
  for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
    const int64_t n = std::min(chunk, rows - r0);
    const float *hc = H + r0 * hidden;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, vocab, hidden, 1.0f, hc, hidden, W,
                hidden, 0.0f, logits.get(), vocab);
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < n; ++r) {
      float *row = logits.get() + r * vocab;
      const int64_t label = idAt(labels, r0 + r);
      const float mx = *std::max_element(row, row + vocab), labelLogit = row[label];
      // One exp per element, kept in the row, which becomes dlogits.
      const double sum = sumExp(row, vocab, mx, row);
      rowLoss[r0 + r] = mx + std::log(sum) - labelLogit;
      const float rowScale = float(factor / sum);
      // Probabilities near e^-87 times 1/rows are subnormal, and subnormal
      // GEMM operands run many times slower on x86: flushed to 0 (a change
      // below 1.2e-38).
#pragma omp simd
      for (int64_t j = 0; j < vocab; ++j) {
        float g = row[j] * rowScale;
        row[j] = g < std::numeric_limits<float>::min() ? 0.0f : g;
      }
      row[label] -= float(factor);
    }
    // gradH_c = dlogits W; gradW (+)= dlogits^T h_c.
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, hidden, vocab, 1.0f,
                logits.get(), vocab, W, hidden, 0.0f, dH + r0 * hidden, hidden);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, vocab, hidden, n, 1.0f, logits.get(),
                vocab, hc, hidden, r0 == 0 ? 0.0f : 1.0f, dW, hidden);
  }
  // Summed in row order, in double, like crossEntropy: thread-count independent.
  double total = 0;
  for (double loss : rowLoss)
    total += loss;
  Tensor loss(DType::F32, {});
  *loss.mutableData<float>() = float(total / count);
  return {loss, gradH, gradW};
}

std::pair<Tensor, Tensor> chunkedCrossEntropyBackward(const Tensor &dloss, Tensor gradH,
                                                      Tensor gradW) {
  const float factor = *dloss.data<float>();
  return {scaled(std::move(gradH), factor), scaled(std::move(gradW), factor)};
}

} // namespace kiln::kernels
