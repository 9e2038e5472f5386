//===- ChunkedCrossEntropyTest.cpp - Fused projection + loss vs references ===//
//
// chunkedCrossEntropy against the unfused kernels it replaces
// (crossEntropy(linear(h, W)) and crossEntropyBackward followed by
// linearBackwardData / linearBackwardWeight), over chunk sizes that do and do
// not divide the rows; then against central finite differences of a naive
// float64 loss on a tiny case.
//
//===----------------------------------------------------------------------===//

#include "TestUtil.h"
#include "kiln/Runtime/BackwardKernels.h"
#include "kiln/Runtime/ChunkedCrossEntropy.h"
#include "kiln/Runtime/ForwardKernels.h"

#include <omp.h>

#include <cstring>

using namespace kiln;
using namespace kiln::test;

namespace {

/// Loss, relative: both sum the same double per-row losses in the same order;
/// only the logits' GEMM blocking (chunk rows vs all rows) may differ.
constexpr double kLossRelTol = 1e-6;
/// Gradients, absolute: f32 with entries O(1/rows) (gradH) and smaller; the
/// chunked gradW sums its chunks in a different order than one GEMM. The
/// largest gap seen is 5e-8.
constexpr double kGradTol = 1e-6;
/// Versus float64 finite differences (absolute): f32 rounding plus O(step^2)
/// truncation (~1e-8 at step 1e-4); seen 6e-8.
constexpr double kFloat64Tol = 1e-6;

Tensor labelTensor(int64_t rows, int64_t vocab, uint32_t seed, DType dtype = DType::I64) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int64_t> pick(0, vocab - 1);
  Tensor t(DType::I64, {rows});
  for (int64_t r = 0; r < rows; ++r)
    t.mutableData<int64_t>()[r] = pick(rng);
  return dtype == DType::I64 ? t : t.to(dtype);
}

float value(const Tensor &scalar) { return *scalar.data<float>(); }

struct Unfused {
  Tensor loss, gradH, gradW;
};

/// The ops the chunked kernel replaces, with the cross_entropy op's
/// total_positions handling (the loss and its gradient scaled by rows/total).
Unfused unfused(const Tensor &h, const Tensor &w, const Tensor &labels, double share = 1.0) {
  Tensor logits = kernels::linear(h, w);
  Tensor loss = kernels::crossEntropy(logits, labels), dloss(DType::F32, {});
  *loss.mutableData<float>() *= float(share);
  *dloss.mutableData<float>() = float(share);
  Tensor dlogits = kernels::crossEntropyBackward(logits, labels, dloss);
  return {loss, kernels::linearBackwardData(dlogits, w), kernels::linearBackwardWeight(dlogits, h)};
}

void expectMatches(const kernels::ChunkedCrossEntropyResult &got, const Unfused &want) {
  EXPECT_NEAR(value(got.loss), value(want.loss), kLossRelTol * std::abs(value(want.loss)));
  ASSERT_EQ(got.gradH.shape(), want.gradH.shape());
  ASSERT_EQ(got.gradW.shape(), want.gradW.shape());
  EXPECT_LT(maxAbsDiff(toDoubles(got.gradH), toDoubles(want.gradH)), kGradTol);
  EXPECT_LT(maxAbsDiff(toDoubles(got.gradW), toDoubles(want.gradW)), kGradTol);
}

TEST(ChunkedCrossEntropyTest, MatchesUnfusedKernelsForEveryChunkSize) {
  std::mt19937 rng(31);
  const int64_t vocab = 300, hidden = 24;
  Tensor h = randomTensor({2, 7, hidden}, rng), w = randomTensor({vocab, hidden}, rng, 0.5f);
  Tensor labels = labelTensor(14, vocab, 32).reshaped({2, 7});
  const Unfused want = unfused(h, w, labels);
  // 1 row at a time, chunks not dividing 14 (3, 5), exactly 14, more than 14,
  // and the default (0).
  for (int64_t chunk : {1, 3, 5, 14, 100, 0}) {
    SCOPED_TRACE("chunkRows " + std::to_string(chunk));
    expectMatches(kernels::chunkedCrossEntropy(h, w, labels, {}, chunk), want);
  }
}

TEST(ChunkedCrossEntropyTest, SingleRowAndInt32Labels) {
  std::mt19937 rng(33);
  Tensor h = randomTensor({1, 16}, rng), w = randomTensor({50, 16}, rng);
  Tensor labels = labelTensor(1, 50, 34);
  expectMatches(kernels::chunkedCrossEntropy(h, w, labels, {}, 4), unfused(h, w, labels));

  Tensor h2 = randomTensor({9, 16}, rng);
  Tensor labels64 = labelTensor(9, 50, 35), labels32 = labels64.to(DType::I32);
  auto a = kernels::chunkedCrossEntropy(h2, w, labels64, {}, 4);
  auto b = kernels::chunkedCrossEntropy(h2, w, labels32, {}, 4);
  EXPECT_EQ(value(a.loss), value(b.loss));
  EXPECT_EQ(std::memcmp(a.gradH.rawData(), b.gradH.rawData(), a.gradH.nbytes()), 0);
  EXPECT_EQ(std::memcmp(a.gradW.rawData(), b.gradW.rawData(), a.gradW.nbytes()), 0);
}

TEST(ChunkedCrossEntropyTest, TotalPositionsDividesTheMean) {
  std::mt19937 rng(36);
  Tensor h = randomTensor({6, 8}, rng), w = randomTensor({40, 8}, rng);
  Tensor labels = labelTensor(6, 40, 37);
  // A rank holding 6 of 16 positions: loss and gradients are 6/16 of the
  // local mean's.
  expectMatches(kernels::chunkedCrossEntropy(h, w, labels, 16, 4),
                unfused(h, w, labels, 6.0 / 16.0));
}

TEST(ChunkedCrossEntropyTest, RejectsLabelsOutsideTheVocabulary) {
  std::mt19937 rng(38);
  Tensor h = randomTensor({3, 8}, rng), w = randomTensor({11, 8}, rng);
  Tensor labels(DType::I64, {3});
  labels.mutableData<int64_t>()[2] = 11;
  expectError([&] { kernels::chunkedCrossEntropy(h, w, labels); },
              {"label 11", "position 2", "[0, 11)"});
  labels.mutableData<int64_t>()[2] = -1;
  expectError([&] { kernels::chunkedCrossEntropy(h, w, labels.to(DType::I32)); },
              {"label -1", "[0, 11)"});
}

TEST(ChunkedCrossEntropyTest, LossIsBitwiseIndependentOfOpenMpThreads) {
  std::mt19937 rng(39);
  Tensor h = randomTensor({40, 16}, rng), w = randomTensor({500, 16}, rng);
  Tensor labels = labelTensor(40, 500, 40);
  int previous = omp_get_max_threads();
  omp_set_num_threads(1);
  auto one = kernels::chunkedCrossEntropy(h, w, labels, {}, 7);
  omp_set_num_threads(3);
  auto three = kernels::chunkedCrossEntropy(h, w, labels, {}, 7);
  omp_set_num_threads(previous);
  EXPECT_EQ(value(one.loss), value(three.loss));
  EXPECT_EQ(std::memcmp(one.gradH.rawData(), three.gradH.rawData(), one.gradH.nbytes()), 0);
}

TEST(ChunkedCrossEntropyTest, MatchesFiniteDifferencesOfFloat64Reference) {
  std::mt19937 rng(41);
  const int64_t rows = 3, hidden = 4, vocab = 6;
  Tensor h = randomTensor({rows, hidden}, rng), w = randomTensor({vocab, hidden}, rng);
  Tensor labels = labelTensor(rows, vocab, 42);
  std::vector<double> hs = toDoubles(h), ws = toDoubles(w);
  auto loss = [&] {
    double total = 0;
    for (int64_t r = 0; r < rows; ++r) {
      std::vector<double> logits(vocab, 0.0);
      for (int64_t j = 0; j < vocab; ++j)
        for (int64_t e = 0; e < hidden; ++e)
          logits[j] += hs[r * hidden + e] * ws[j * hidden + e];
      double sum = 0;
      for (double l : logits)
        sum += std::exp(l);
      total += std::log(sum) - logits[labels.data<int64_t>()[r]];
    }
    return total / rows;
  };
  auto got = kernels::chunkedCrossEntropy(h, w, labels, {}, 2);
  EXPECT_NEAR(value(got.loss), loss(), kFloat64Tol);
  EXPECT_LT(maxAbsDiff(toDoubles(got.gradH), centralDifferences(hs, loss)), kFloat64Tol);
  EXPECT_LT(maxAbsDiff(toDoubles(got.gradW), centralDifferences(ws, loss)), kFloat64Tol);
}

TEST(ChunkedCrossEntropyTest, BackwardScalesAndReusesUniquelyOwnedBuffers) {
  std::mt19937 rng(43);
  Tensor h = randomTensor({5, 8}, rng), w = randomTensor({30, 8}, rng);
  auto fwd = kernels::chunkedCrossEntropy(h, w, labelTensor(5, 30, 44));
  Tensor dloss(DType::F32, {});
  *dloss.mutableData<float>() = 1.7f;
  std::vector<double> gh = toDoubles(fwd.gradH), gw = toDoubles(fwd.gradW);
  // gradH is shared (kept by `keep`), so it must not be overwritten; gradW
  // is handed over and its buffer is reused.
  Tensor keep = fwd.gradH;
  const void *gradWBuffer = fwd.gradW.rawData();
  auto [dh, dw] = kernels::chunkedCrossEntropyBackward(dloss, fwd.gradH, std::move(fwd.gradW));
  EXPECT_NE(dh.rawData(), keep.rawData());
  EXPECT_EQ(toDoubles(keep), gh);
  EXPECT_EQ(dw.rawData(), gradWBuffer);
  for (size_t i = 0; i < gh.size(); ++i)
    EXPECT_EQ(dh.data<float>()[i], 1.7f * float(gh[i]));
  for (size_t i = 0; i < gw.size(); ++i)
    EXPECT_EQ(dw.data<float>()[i], 1.7f * float(gw[i]));
}

TEST(ChunkedCrossEntropyTest, ScratchIsOneChunkOfLogitsAndTheRowLosses) {
  EXPECT_EQ(kernels::chunkedCrossEntropyScratchBytes(1024, 151936),
            256 * 151936 * 4 + 1024 * 8); // the default chunk: 155.6 MB of logits
  EXPECT_EQ(kernels::chunkedCrossEntropyScratchBytes(1024, 151936, 64),
            64 * 151936 * 4 + 1024 * 8);
  // A chunk never exceeds the rows.
  EXPECT_EQ(kernels::chunkedCrossEntropyScratchBytes(5, 100, 64), 5 * 100 * 4 + 5 * 8);
}

} // namespace
