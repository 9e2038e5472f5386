//===- LossParallelTest.cpp - Loss on vocabulary shards vs float64 --------===//
//
// The loss-parallel kernels on n vocabulary shards, combined as kiln-partition
// combines them (max over the shards' row maxima, sum of their statistics),
// against a naive float64 cross-entropy and its gradient over the whole
// vocabulary; the vocabulary-parallel embedding's shards against the whole
// lookup.
//
//===----------------------------------------------------------------------===//

#include "TestUtil.h"
#include "kiln/Runtime/BackwardKernels.h"
#include "kiln/Runtime/ForwardKernels.h"
#include "kiln/Runtime/LossParallel.h"

using namespace kiln;
using namespace kiln::test;

namespace {

/// f32 against float64 (absolute): the loss sums a few f32-rounded log terms
/// (~1e-7 each); gradient entries are O(1/rows) with f32 exp and division.
constexpr double kLossTol = 1e-6, kGradTol = 1e-7;

struct Reference {
  double loss;
  std::vector<double> grad; ///< [rows, vocab]
};

/// Mean cross-entropy over rows and its gradient times `lossGrad`, in double.
Reference naiveCrossEntropy(const Tensor &logits, const std::vector<int64_t> &labels,
                            double lossGrad) {
  int64_t vocab = logits.shape().back(), rows = int64_t(labels.size());
  const float *l = logits.data<float>();
  Reference ref{0, std::vector<double>(rows * vocab)};
  for (int64_t r = 0; r < rows; ++r) {
    double mx = -INFINITY, sum = 0;
    for (int64_t j = 0; j < vocab; ++j)
      mx = std::max(mx, double(l[r * vocab + j]));
    for (int64_t j = 0; j < vocab; ++j)
      sum += std::exp(double(l[r * vocab + j]) - mx);
    ref.loss += (mx + std::log(sum) - l[r * vocab + labels[r]]) / rows;
    for (int64_t j = 0; j < vocab; ++j)
      ref.grad[r * vocab + j] =
          (std::exp(double(l[r * vocab + j]) - mx) / sum - (j == labels[r])) * lossGrad / rows;
  }
  return ref;
}

Tensor ids(const std::vector<int64_t> &values) {
  Tensor t(DType::I64, {int64_t(values.size())});
  std::copy(values.begin(), values.end(), t.mutableData<int64_t>());
  return t;
}

/// Columns [offset, offset + size) of every row of a [rows, cols] tensor.
Tensor columns(const Tensor &t, int64_t offset, int64_t size) {
  int64_t rows = t.dim(0), cols = t.dim(1);
  Tensor out(DType::F32, {rows, size});
  for (int64_t r = 0; r < rows; ++r)
    std::copy_n(t.data<float>() + r * cols + offset, size, out.mutableData<float>() + r * size);
  return out;
}

/// Rows [offset, offset + size) of a [rows, cols] tensor.
Tensor rows(const Tensor &t, int64_t offset, int64_t size) {
  int64_t cols = t.dim(1);
  Tensor out(DType::F32, {size, cols});
  std::copy_n(t.data<float>() + offset * cols, size * cols, out.mutableData<float>());
  return out;
}

class LossParallelShards : public ::testing::TestWithParam<int64_t> {};

TEST_P(LossParallelShards, MatchFloat64CrossEntropy) {
  int64_t n = GetParam(), vocab = 24, local = vocab / n, rowCount = 7;
  std::mt19937 rng(11);
  // Spread logits so that different shards hold each row's maximum.
  Tensor logits = randomTensor({rowCount, vocab}, rng, 3.0f);
  std::vector<int64_t> labelValues = {0, 23, 5, 12, 11, 17, 8};
  Tensor labels = ids(labelValues);
  const double lossGrad = 0.75;
  Reference want = naiveCrossEntropy(logits, labelValues, lossGrad);

  std::vector<Tensor> shards;
  Tensor max = kernels::rowMax(columns(logits, 0, local));
  for (int64_t s = 0; s < n; ++s) {
    shards.push_back(columns(logits, s * local, local));
    Tensor m = kernels::rowMax(shards.back());
    for (int64_t r = 0; r < rowCount; ++r)
      max.mutableData<float>()[r] = std::max(max.data<float>()[r], m.data<float>()[r]);
  }
  Tensor stats(DType::F32, {rowCount, 2});
  for (int64_t s = 0; s < n; ++s) {
    Tensor part = kernels::vocabShardStats(shards[s], max, labels, {s * local, vocab});
    for (int64_t i = 0; i < 2 * rowCount; ++i)
      stats.mutableData<float>()[i] += part.data<float>()[i];
  }
  float loss = *kernels::lossFromStats(max, stats, rowCount).data<float>();
  EXPECT_NEAR(loss, want.loss, kLossTol);
  // A rank's share of a batch split over ranks: divided by the global count.
  EXPECT_NEAR(*kernels::lossFromStats(max, stats, 2 * rowCount).data<float>(), want.loss / 2,
              kLossTol);

  double worst = 0;
  for (int64_t s = 0; s < n; ++s) {
    Tensor grad = kernels::lossFromStatsBackward(shards[s], labels, float(lossGrad), max, stats,
                                                 {s * local, vocab}, rowCount);
    for (int64_t r = 0; r < rowCount; ++r)
      for (int64_t j = 0; j < local; ++j)
        worst = std::max(worst, std::abs(grad.data<float>()[r * local + j] -
                                         want.grad[r * vocab + s * local + j]));
  }
  EXPECT_LT(worst, kGradTol);
}

INSTANTIATE_TEST_SUITE_P(Shards, LossParallelShards, ::testing::Values(1, 2, 3, 4));

TEST(LossParallel, LabelsOutsideTheWholeVocabularyAreErrors) {
  std::mt19937 rng(3);
  Tensor logits = randomTensor({2, 4}, rng), max = kernels::rowMax(logits);
  // Shard 1 of 2 holds ids 4..7 of 8: id 7 is valid (another shard's on
  // shard 0), id 8 is outside the vocabulary.
  EXPECT_NO_THROW(kernels::vocabShardStats(logits, max, ids({7, 0}), {0, 8}));
  EXPECT_THROW(kernels::vocabShardStats(logits, max, ids({8, 0}), {4, 8}), Error);
}

TEST(LossParallel, EmbeddingShardsSumToTheWholeLookup) {
  std::mt19937 rng(5);
  int64_t vocab = 12, dim = 5, n = 3, local = vocab / n;
  Tensor table = randomTensor({vocab, dim}, rng);
  Tensor tokens = ids({0, 11, 4, 4, 7, 3});
  Tensor whole = kernels::embedding(table, tokens);
  std::vector<double> sum(whole.numel(), 0.0);
  Tensor grad = randomTensor({6, dim}, rng);
  Tensor wholeGrad = kernels::embeddingBackward(grad, tokens, vocab);
  for (int64_t s = 0; s < n; ++s) {
    kernels::VocabShard shard{s * local, vocab};
    Tensor part = kernels::embedding(rows(table, s * local, local), tokens, shard);
    for (int64_t i = 0; i < part.numel(); ++i)
      sum[i] += part.data<float>()[i];
    // The shard's rows of the table's gradient, exactly.
    Tensor partGrad = kernels::embeddingBackward(grad, tokens, local, shard);
    EXPECT_EQ(toDoubles(partGrad), toDoubles(rows(wholeGrad, s * local, local))) << "shard " << s;
  }
  EXPECT_EQ(sum, toDoubles(whole));
  EXPECT_THROW(kernels::embedding(rows(table, 0, local), ids({12}), {0, vocab}), Error);
}

} // namespace
