//===- LossParallel.cpp - Cross-entropy on vocabulary shards --------------===//

#include "kiln/Runtime/LossParallel.h"

#include <algorithm>
#include <cmath>

namespace kiln::kernels {

Tensor rowMax(const Tensor &logits) {
  int64_t vocab = logits.shape().back(), rows = rowsOf(logits);
  Tensor max = Tensor::uninitialized(DType::F32, Shape(logits.shape().begin(),
                                                       logits.shape().end() - 1));
  const float *l = logits.data<float>();
  float *m = max.mutableData<float>();
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r)
    m[r] = *std::max_element(l + r * vocab, l + (r + 1) * vocab);
  return max;
}

Tensor vocabShardStats(const Tensor &logits, const Tensor &max, const Tensor &labels,
                       VocabShard shard) {
  int64_t vocab = logits.shape().back(), rows = rowsOf(logits);
  checkIds(labels, shard.limit(vocab), "label");
  Shape shape = max.shape();
  shape.push_back(2);
  Tensor stats = Tensor::uninitialized(DType::F32, shape);
  const float *l = logits.data<float>(), *m = max.data<float>();
  float *s = stats.mutableData<float>();
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const float *row = l + r * vocab;
    int64_t label = idAt(labels, r);
    s[2 * r] = float(sumExp(row, vocab, m[r], nullptr));
    s[2 * r + 1] = shard.holds(label, vocab) ? row[label - shard.offset] : 0.0f;
  }
  return stats;
}

Tensor lossFromStats(const Tensor &max, const Tensor &stats, int64_t positions) {
  const float *m = max.data<float>(), *s = stats.data<float>();
  // Rows summed in order, in double, as kernels::crossEntropy sums them.
  double total = 0;
  for (int64_t r = 0, rows = max.numel(); r < rows; ++r)
    total += double(m[r]) + std::log(double(s[2 * r])) - double(s[2 * r + 1]);
  Tensor loss(DType::F32, {});
  *loss.mutableData<float>() = float(total / double(positions));
  return loss;
}

Tensor lossFromStatsBackward(const Tensor &logits, const Tensor &labels, float lossGrad,
                             const Tensor &max, const Tensor &stats, VocabShard shard,
                             int64_t positions) {
  int64_t vocab = logits.shape().back(), rows = rowsOf(logits);
  checkIds(labels, shard.limit(vocab), "label");
  Tensor dlogits = Tensor::uninitialized(DType::F32, logits.shape());
  const float *l = logits.data<float>(), *m = max.data<float>(), *s = stats.data<float>();
  float *dl = dlogits.mutableData<float>();
  double factor = double(lossGrad) / double(positions);
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const float *row = l + r * vocab;
    float *out = dl + r * vocab;
    float shift = m[r], scale = float(factor / double(s[2 * r]));
#pragma omp simd
    for (int64_t j = 0; j < vocab; ++j)
      out[j] = expNonPositive(row[j] - shift) * scale;
    int64_t label = idAt(labels, r);
    if (shard.holds(label, vocab))
      out[label - shard.offset] -= float(factor);
  }
  return dlogits;
}

} // namespace kiln::kernels
