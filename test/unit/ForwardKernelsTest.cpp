//===- ForwardKernelsTest.cpp - CPU kernels vs naive float64 references ---===//
//
// Each kernel is compared with a straightforward float64 implementation
// written here from the op's definition, on random inputs. Tolerance: 1e-5
// absolute (float32 rounding of O(1) values through short reductions).
//
//===----------------------------------------------------------------------===//

#include "kiln/Runtime/ForwardKernels.h"
#include "AttentionReference.h"
#include "TestUtil.h"
#include "kiln/Runtime/TokenBatch.h"

using namespace kiln;
using namespace kiln::test;

namespace {

constexpr double kTol = 1e-5;

Tensor idTensor(Shape shape, const std::vector<int64_t> &ids) {
  Tensor t(DType::I64, std::move(shape));
  std::copy(ids.begin(), ids.end(), t.mutableData<int64_t>());
  return t;
}

TEST(KernelsTest, EmbeddingGathersRowsAndRejectsOutOfRangeIds) {
  std::mt19937 rng(1);
  Tensor table = randomTensor({5, 3}, rng);
  Tensor ids = idTensor({2, 2}, {4, 0, 2, 4});
  Tensor out = kernels::embedding(table, ids);
  ASSERT_EQ(out.shape(), (Shape{2, 2, 3}));
  const float *t = table.data<float>(), *o = out.data<float>();
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 3; ++j)
      EXPECT_EQ(o[i * 3 + j], t[ids.data<int64_t>()[i] * 3 + j]);
  expectError([&] { kernels::embedding(table, idTensor({1}, {5})); },
              {"token id 5", "[0, 5)"});
}

TEST(KernelsTest, RoundToBf16HandValues) {
  // bf16 keeps 8 significant bits: near 1 its spacing is 2^-7.
  const float ulp = std::ldexp(1.0f, -7), half = std::ldexp(1.0f, -8);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float big = std::numeric_limits<float>::max();
  const std::vector<float> in = {1.0f + half,               // tie: to even (1)
                                 1.0f + 3 * half,           // tie: to even (1 + 2^-6)
                                 1.0f + half + ulp / 64,    // above the tie: up
                                 -(1.0f + half - ulp / 64), // below the tie: down
                                 nan, big, -big, 0.1f, 0.0f};
  Tensor x(DType::F32, {9});
  std::copy(in.begin(), in.end(), x.mutableData<float>());
  std::vector<float> want = {1.0f, 1.0f + 2 * ulp, 1.0f + ulp, -1.0f,
                             nan, INFINITY, -INFINITY,
                             0.10009765625f, // 0x3DCD: 0.1 = 1.6 * 2^-4, 1.6 -> 205/128
                             0.0f};
  Tensor y = kernels::roundTo(x, DType::BF16);
  ASSERT_EQ(y.dtype(), DType::F32);
  for (int i = 0; i < 9; ++i) {
    float got = y.data<float>()[i];
    if (std::isnan(want[i]))
      EXPECT_TRUE(std::isnan(got)) << i;
    else
      EXPECT_EQ(got, want[i]) << i;
  }
  EXPECT_THROW(kernels::roundTo(x, DType::I32), Error);
}

TEST(KernelsTest, RmsNormMatchesFloat64) {
  std::mt19937 rng(2);
  Tensor x = randomTensor({3, 4, 16}, rng), w = randomTensor({16}, rng);
  float eps = 1e-6f;
  std::vector<double> ref(x.numel());
  auto xs = toDoubles(x), ws = toDoubles(w);
  for (int r = 0; r < 12; ++r) {
    double ss = 0;
    for (int i = 0; i < 16; ++i)
      ss += xs[r * 16 + i] * xs[r * 16 + i];
    double inv = 1 / std::sqrt(ss / 16 + eps);
    for (int i = 0; i < 16; ++i)
      ref[r * 16 + i] = xs[r * 16 + i] * inv * ws[i];
  }
  EXPECT_LT(maxAbsDiff(toDoubles(kernels::rmsNorm(x, w, eps)), ref), kTol);
}

TEST(KernelsTest, LinearMatchesFloat64) {
  std::mt19937 rng(3);
  Tensor x = randomTensor({2, 5, 7}, rng), w = randomTensor({6, 7}, rng);
  auto xs = toDoubles(x), ws = toDoubles(w);
  std::vector<double> ref(10 * 6);
  for (int m = 0; m < 10; ++m)
    for (int n = 0; n < 6; ++n)
      for (int k = 0; k < 7; ++k)
        ref[m * 6 + n] += xs[m * 7 + k] * ws[n * 7 + k];
  Tensor out = kernels::linear(x, w);
  EXPECT_EQ(out.shape(), (Shape{2, 5, 6}));
  EXPECT_LT(maxAbsDiff(toDoubles(out), ref), kTol);
}

/// HF/torchtitan rotate-half RoPE in float64.
std::vector<double> ropeReference(const Tensor &x, double theta) {
  int64_t B = x.dim(0), S = x.dim(1), H = x.dim(2), D = x.dim(3), half = D / 2;
  auto xs = toDoubles(x);
  std::vector<double> out(xs.size());
  for (int64_t b = 0; b < B; ++b)
    for (int64_t s = 0; s < S; ++s)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t i = 0; i < D; ++i) {
          int64_t base = ((b * S + s) * H + h) * D;
          double angle = s * std::pow(theta, -2.0 * (i % half) / D);
          double rotated = i < half ? -xs[base + i + half] : xs[base + i - half];
          out[base + i] = xs[base + i] * std::cos(angle) + rotated * std::sin(angle);
        }
  return out;
}

TEST(KernelsTest, RopeMatchesFloat64) {
  std::mt19937 rng(4);
  Tensor q = randomTensor({2, 9, 3, 8}, rng);
  Tensor cache = kernels::ropeCache(1e4, 9, 8);
  EXPECT_EQ(cache.shape(), (Shape{9, 16}));
  EXPECT_LT(maxAbsDiff(toDoubles(kernels::rope(q, cache)), ropeReference(q, 1e4)), kTol);
}

TEST(KernelsTest, AttentionMatchesFloat64WithGqaCausalAndFull) {
  std::mt19937 rng(5);
  Tensor q = randomTensor({2, 7, 4, 8}, rng), k = randomTensor({2, 7, 2, 8}, rng),
         v = randomTensor({2, 7, 2, 8}, rng);
  for (bool causal : {true, false}) {
    auto [out, lse] = kernels::attention(q, k, v, causal, 0.35f);
    AttentionReference ref = attentionReference(q, k, v, nullptr, causal, 0.35f);
    EXPECT_EQ(lse.shape(), (Shape{2, 4, 7}));
    EXPECT_LT(maxAbsDiff(toDoubles(out), ref.out), kTol) << "causal=" << causal;
    EXPECT_LT(maxAbsDiff(toDoubles(lse), ref.lse), kTol) << "causal=" << causal;
  }
}

TEST(KernelsTest, SwigluAndAddMatchFloat64) {
  std::mt19937 rng(6);
  Tensor g = randomTensor({4, 6}, rng), u = randomTensor({4, 6}, rng);
  auto gs = toDoubles(g), us = toDoubles(u);
  std::vector<double> swi(gs.size()), sum(gs.size());
  for (size_t i = 0; i < gs.size(); ++i) {
    swi[i] = gs[i] / (1 + std::exp(-gs[i])) * us[i];
    sum[i] = gs[i] + us[i];
  }
  EXPECT_LT(maxAbsDiff(toDoubles(kernels::swiglu(g, u)), swi), kTol);
  EXPECT_LT(maxAbsDiff(toDoubles(kernels::add(g, u)), sum), kTol);
}

TEST(KernelsTest, CrossEntropyMatchesFloat64AndRejectsBadLabels) {
  std::mt19937 rng(7);
  Tensor logits = randomTensor({2, 3, 11}, rng, 3.0f);
  Tensor labels = idTensor({2, 3}, {0, 10, 5, 3, 3, 7});
  auto ls = toDoubles(logits);
  double total = 0;
  for (int r = 0; r < 6; ++r) {
    double sum = 0;
    for (int j = 0; j < 11; ++j)
      sum += std::exp(ls[r * 11 + j]);
    total += std::log(sum) - ls[r * 11 + labels.data<int64_t>()[r]];
  }
  Tensor loss = kernels::crossEntropy(logits, labels);
  EXPECT_EQ(loss.rank(), 0u);
  EXPECT_NEAR(*loss.data<float>(), total / 6, kTol);
  expectError([&] { kernels::crossEntropy(logits, idTensor({2, 3}, {0, 0, 11, 0, 0, 0})); },
              {"label 11", "[0, 11)"});
}

TEST(KernelsTest, TokenWindowsSplitIntoInputsAndLabels) {
  Tensor tokens = idTensor({2, 4}, {1, 2, 3, 4, 5, 6, 7, 8});
  auto [inputs, labels] = splitInputsAndLabels(tokens);
  const int64_t *in = inputs.data<int64_t>(), *lb = labels.data<int64_t>();
  EXPECT_EQ(std::vector<int64_t>(in, in + 6), (std::vector<int64_t>{1, 2, 3, 5, 6, 7}));
  EXPECT_EQ(std::vector<int64_t>(lb, lb + 6), (std::vector<int64_t>{2, 3, 4, 6, 7, 8}));
  expectError([&] { splitInputsAndLabels(idTensor({2, 1}, {1, 2})); },
              {"[batch, seq + 1]", "[2, 1]"});
}

} // namespace

namespace {

TEST(KernelsTest, ExpNonPositiveIsWithinAFewUlpOfExp) {
  // Dense sweep of (-87, 0], then the clamp region, where e^x < 1.7e-38.
  double worst = 0;
  for (int i = 0; i < 870000; ++i) {
    float x = -87.0f * float(i) / 870000.0f;
    double want = std::exp(double(x));
    double got = kiln::kernels::expNonPositive(x);
    worst = std::max(worst, std::abs(got - want) / want);
  }
  EXPECT_LT(worst, 3e-7) << "a float's ulp is 6e-8 to 1.2e-7 relative";
  EXPECT_EQ(kiln::kernels::expNonPositive(0.0f), 1.0f);
  EXPECT_EQ(kiln::kernels::expNonPositive(-100.0f), 0.0f);
  EXPECT_EQ(kiln::kernels::expNonPositive(-std::numeric_limits<float>::infinity()), 0.0f);
  // A NaN (diverged weights) propagates, without undefined behaviour on the
  // way (UBSan once caught its int conversion).
  EXPECT_TRUE(std::isnan(kiln::kernels::expNonPositive(std::nanf(""))));
  EXPECT_EQ(kiln::kernels::expNonPositive(-INFINITY), 0.0f);
}

} // namespace
