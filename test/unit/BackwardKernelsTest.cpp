//===- BackwardKernelsTest.cpp - VJP kernels and AdamW vs references ------===//
//
// Every VJP kernel is checked against central finite differences of its
// forward kernel in Kernels.h: with a random cotangent dy and the scalar
// L(x) = sum(dy * f(x)) (summed in double), dL/dx_i ~ (L(x+h) - L(x-h)) / 2h.
// Where a float64 analytic reference is short to write it is compared at a
// tight tolerance too. AdamW is compared with the torch formulas in float64.
//
//===----------------------------------------------------------------------===//

#include "kiln/Runtime/BackwardKernels.h"
#include "AttentionReference.h"
#include "TestUtil.h"
#include "kiln/Runtime/ForwardKernels.h"

#include <functional>

using namespace kiln;
using namespace kiln::test;

namespace {

/// Finite differences: relative-or-absolute, |a - fd| <= kFdTol * max(1, |fd|).
/// The forward runs in float32, so L carries ~1e-6 rounding noise which the
/// 1/2h division amplifies to ~1e-4, plus O(h^2) truncation error.
constexpr double kFdTol = 2e-3;
/// Float64 references: absolute, float32 rounding through short reductions.
constexpr double kTol = 1e-5;

Tensor idTensor(Shape shape, const std::vector<int64_t> &ids) {
  Tensor t(DType::I64, std::move(shape));
  std::copy(ids.begin(), ids.end(), t.mutableData<int64_t>());
  return t;
}

Tensor scalar(float value) {
  Tensor t(DType::F32, {});
  *t.mutableData<float>() = value;
  return t;
}

double dotSum(const Tensor &a, const Tensor &b) {
  EXPECT_EQ(a.shape(), b.shape());
  double sum = 0;
  for (int64_t i = 0; i < a.numel(); ++i)
    sum += double(a.data<float>()[i]) * b.data<float>()[i];
  return sum;
}

/// Expects `analytic` == dL/dx for L = sum(dy * f()) by central differences.
/// x is perturbed in place, so `f` must read it (e.g. capture by reference).
void expectMatchesFiniteDifferences(const std::string &what, Tensor &x,
                                    const std::function<Tensor()> &f,
                                    const Tensor &dy, const Tensor &analytic,
                                    float h = 1e-2f) {
  ASSERT_EQ(analytic.shape(), x.shape()) << what;
  float *xs = x.mutableData<float>();
  double worst = 0;
  int64_t worstAt = -1;
  for (int64_t i = 0; i < x.numel(); ++i) {
    float orig = xs[i], plus = orig + h, minus = orig - h;
    xs[i] = plus;
    double up = dotSum(dy, f());
    xs[i] = minus;
    double down = dotSum(dy, f());
    xs[i] = orig;
    // Divide by the step actually taken after float rounding of x +- h.
    double fd = (up - down) / (double(plus) - minus);
    double err = std::abs(analytic.data<float>()[i] - fd) / std::max(1.0, std::abs(fd));
    if (err > worst)
      worst = err, worstAt = i;
  }
  EXPECT_LE(worst, kFdTol) << what << ": worst element " << worstAt;
}

TEST(BackwardKernelsTest, EmbeddingAccumulatesRepeatedIds) {
  std::mt19937 rng(11);
  Tensor table = randomTensor({5, 3}, rng);
  Tensor ids = idTensor({2, 3}, {4, 0, 2, 4, 1, 4}); // id 4 three times, 3 never
  Tensor dy = randomTensor({2, 3, 3}, rng);
  Tensor dtable = kernels::embeddingBackward(dy, ids, 5);
  expectMatchesFiniteDifferences("dtable", table,
                                 [&] { return kernels::embedding(table, ids); }, dy,
                                 dtable);
}

TEST(BackwardKernelsTest, EmbeddingRejectsOutOfRangeIds) {
  Tensor dy(DType::F32, {3, 2});
  expectError([&] { kernels::embeddingBackward(dy, idTensor({3}, {0, 1, 7}), 5); },
              {"token id 7", "position 2", "[0, 5)"});
  expectError([&] { kernels::embeddingBackward(dy, idTensor({3}, {-1, 1, 2}), 5); },
              {"token id -1", "position 0"});
}

TEST(BackwardKernelsTest, RmsNormMatchesFiniteDifferencesAndFloat64) {
  std::mt19937 rng(12);
  Tensor x = randomTensor({2, 3, 8}, rng), w = randomTensor({8}, rng);
  Tensor dy = randomTensor({2, 3, 8}, rng);
  float eps = 1e-6f;
  auto [dx, dw] = kernels::rmsNormBackward(dy, x, w, eps);
  auto f = [&] { return kernels::rmsNorm(x, w, eps); };
  expectMatchesFiniteDifferences("dx", x, f, dy, dx);
  expectMatchesFiniteDifferences("dw", w, f, dy, dw);

  // Float64: dx = r g - r^3 x (g . x) / D with g = dy * w; dw = sum dy x r.
  auto xs = toDoubles(x), ws = toDoubles(w), gs = toDoubles(dy);
  std::vector<double> refDx(xs.size()), refDw(8);
  for (int row = 0; row < 6; ++row) {
    double ss = 0, dot = 0;
    for (int i = 0; i < 8; ++i) {
      ss += xs[row * 8 + i] * xs[row * 8 + i];
      dot += gs[row * 8 + i] * ws[i] * xs[row * 8 + i];
    }
    double r = 1 / std::sqrt(ss / 8 + eps);
    for (int i = 0; i < 8; ++i) {
      refDx[row * 8 + i] = r * gs[row * 8 + i] * ws[i] - r * r * r * xs[row * 8 + i] * dot / 8;
      refDw[i] += gs[row * 8 + i] * xs[row * 8 + i] * r;
    }
  }
  EXPECT_LT(maxAbsDiff(toDoubles(dx), refDx), kTol);
  EXPECT_LT(maxAbsDiff(toDoubles(dw), refDw), kTol);
}

TEST(BackwardKernelsTest, LinearMatchesFiniteDifferencesAndFloat64) {
  std::mt19937 rng(13);
  Tensor x = randomTensor({2, 3, 5}, rng), w = randomTensor({4, 5}, rng);
  Tensor dy = randomTensor({2, 3, 4}, rng);
  Tensor dx = kernels::linearBackwardData(dy, w);
  Tensor dw = kernels::linearBackwardWeight(dy, x);
  EXPECT_EQ(dx.shape(), x.shape());
  auto f = [&] { return kernels::linear(x, w); };
  expectMatchesFiniteDifferences("dx", x, f, dy, dx);
  expectMatchesFiniteDifferences("dw", w, f, dy, dw);

  auto xs = toDoubles(x), ws = toDoubles(w), gs = toDoubles(dy);
  std::vector<double> refDx(6 * 5), refDw(4 * 5);
  for (int m = 0; m < 6; ++m)
    for (int n = 0; n < 4; ++n)
      for (int k = 0; k < 5; ++k) {
        refDx[m * 5 + k] += gs[m * 4 + n] * ws[n * 5 + k];
        refDw[n * 5 + k] += gs[m * 4 + n] * xs[m * 5 + k];
      }
  EXPECT_LT(maxAbsDiff(toDoubles(dx), refDx), kTol);
  EXPECT_LT(maxAbsDiff(toDoubles(dw), refDw), kTol);
}

TEST(BackwardKernelsTest, RopeMatchesFiniteDifferences) {
  std::mt19937 rng(14);
  Tensor x = randomTensor({2, 5, 3, 8}, rng), dy = randomTensor({2, 5, 3, 8}, rng);
  Tensor cache = kernels::ropeCache(1e4, 5, 8);
  expectMatchesFiniteDifferences("dx", x, [&] { return kernels::rope(x, cache); }, dy,
                                 kernels::ropeBackward(dy, cache));
}

TEST(BackwardKernelsTest, AttentionGqaMatchesFiniteDifferencesAndFloat64) {
  std::mt19937 rng(15);
  Tensor q = randomTensor({2, 5, 4, 8}, rng), k = randomTensor({2, 5, 2, 8}, rng),
         v = randomTensor({2, 5, 2, 8}, rng), dy = randomTensor({2, 5, 4, 8}, rng);
  const float scale = 0.35f;
  for (bool causal : {true, false}) {
    SCOPED_TRACE(causal ? "causal" : "full");
    auto [out, lse] = kernels::attention(q, k, v, causal, scale);
    auto [dq, dk, dv] = kernels::attentionBackward(dy, q, k, v, out, lse, causal, scale);
    auto f = [&] { return kernels::attention(q, k, v, causal, scale).first; };
    expectMatchesFiniteDifferences("dq", q, f, dy, dq);
    expectMatchesFiniteDifferences("dk", k, f, dy, dk);
    expectMatchesFiniteDifferences("dv", v, f, dy, dv);
    AttentionReference ref = attentionReference(q, k, v, &dy, causal, scale);
    EXPECT_LT(maxAbsDiff(toDoubles(dq), ref.dq), kTol);
    EXPECT_LT(maxAbsDiff(toDoubles(dk), ref.dk), kTol);
    EXPECT_LT(maxAbsDiff(toDoubles(dv), ref.dv), kTol);
  }
}

TEST(BackwardKernelsTest, SwigluMatchesFiniteDifferences) {
  std::mt19937 rng(16);
  Tensor g = randomTensor({3, 7}, rng, 2.0f), u = randomTensor({3, 7}, rng),
         dy = randomTensor({3, 7}, rng);
  auto [dgate, dup] = kernels::swigluBackward(dy, g, u);
  auto f = [&] { return kernels::swiglu(g, u); };
  expectMatchesFiniteDifferences("dgate", g, f, dy, dgate);
  expectMatchesFiniteDifferences("dup", u, f, dy, dup);
}

TEST(BackwardKernelsTest, CrossEntropyMatchesFiniteDifferencesWithScaledLoss) {
  std::mt19937 rng(17);
  Tensor logits = randomTensor({2, 3, 7}, rng, 2.0f);
  Tensor labels = idTensor({2, 3}, {0, 6, 3, 3, 1, 5});
  Tensor dloss = scalar(1.7f);
  expectMatchesFiniteDifferences(
      "dlogits", logits, [&] { return kernels::crossEntropy(logits, labels); }, dloss,
      kernels::crossEntropyBackward(logits, labels, dloss));
}

TEST(BackwardKernelsTest, GlobalNormMatchesFloat64) {
  std::mt19937 rng(18);
  std::vector<Tensor> ts = {randomTensor({3, 4}, rng), randomTensor({5}, rng),
                            scalar(-2.5f)};
  double sumSq = 0;
  for (const Tensor &t : ts)
    for (double x : toDoubles(t))
      sumSq += x * x;
  Tensor norm = kernels::globalNorm(ts);
  EXPECT_EQ(norm.rank(), 0u);
  EXPECT_NEAR(*norm.data<float>(), std::sqrt(sumSq), kTol);
}

TEST(BackwardKernelsTest, AdamWMatchesTorchFormulasInFloat64) {
  std::mt19937 rng(19);
  Tensor p = randomTensor({4, 6}, rng), m(DType::F32, {4, 6}), v(DType::F32, {4, 6});
  std::vector<double> rp = toDoubles(p), rm(rp.size()), rv(rp.size());
  for (int64_t step = 1; step <= 3; ++step) {
    kernels::AdamWHyper hyper{1e-3, 0.9, 0.95, 1e-8, 0.1, step, 0.5};
    Tensor grad = randomTensor({4, 6}, rng);
    std::vector<double> pBefore = toDoubles(p);
    std::tie(p, m, v) = kernels::adamw(p, grad, m, v, hyper);
    auto gs = toDoubles(grad);
    double bc1 = 1 - std::pow(0.9, step), bc2 = 1 - std::pow(0.95, step);
    for (size_t i = 0; i < rp.size(); ++i) {
      double g = gs[i] * 0.5;
      rp[i] *= 1 - 1e-3 * 0.1;
      rm[i] += (g - rm[i]) * (1 - 0.9);
      rv[i] = rv[i] * 0.95 + (1 - 0.95) * g * g;
      rp[i] -= 1e-3 / bc1 * rm[i] / (std::sqrt(rv[i]) / std::sqrt(bc2) + 1e-8);
    }
    EXPECT_LT(maxAbsDiff(toDoubles(p), rp), 1e-6) << "step " << step;
    EXPECT_LT(maxAbsDiff(toDoubles(m), rm), 1e-6) << "step " << step;
    EXPECT_LT(maxAbsDiff(toDoubles(v), rv), 1e-6) << "step " << step;
    EXPECT_GT(maxAbsDiff(toDoubles(p), pBefore), 0.0) << "step " << step;
  }
}

TEST(BackwardKernelsTest, AdamWSingleElementByHandAndLeavesInputsAlone) {
  // m = 0.1 * 0.5 = 0.05; v = 0.05 * 0.5^2 = 0.0125; bias corrections 0.1 and
  // 0.05, so denom = sqrt(0.0125 / 0.05) = 0.5 and p = 1 - (0.1 / 0.1) * 0.05
  // / 0.5 = 0.9.
  Tensor p = scalar(1.0f), g = scalar(0.5f), m = scalar(0.0f), v = scalar(0.0f);
  auto [p1, m1, v1] =
      kernels::adamw(p, g, m, v, {0.1, 0.9, 0.95, 0.0, 0.0, /*step=*/1, 1.0});
  EXPECT_NEAR(*m1.data<float>(), 0.05, 1e-7);
  EXPECT_NEAR(*v1.data<float>(), 0.0125, 1e-7);
  EXPECT_NEAR(*p1.data<float>(), 0.9, 1e-6);
  EXPECT_EQ(*p.data<float>(), 1.0f);
  EXPECT_EQ(*m.data<float>(), 0.0f);
  EXPECT_EQ(*v.data<float>(), 0.0f);
}

} // namespace

namespace {

TEST(BackwardKernelsTest, AdamWWritesInPlaceOnlyIntoUniquelyOwnedInputs) {
  std::mt19937 rng(21);
  Tensor p = kiln::test::randomTensor({64}, rng), g = kiln::test::randomTensor({64}, rng);
  Tensor m(DType::F32, {64}), v(DType::F32, {64});
  kernels::AdamWHyper hyper{1e-3, 0.9, 0.95, 1e-8, 0.1, 1, 1.0};
  // Shared inputs (the caller keeps them): fresh outputs, inputs untouched.
  auto shared = kernels::adamw(p, g, m, v, hyper);
  EXPECT_NE(std::get<0>(shared).rawData(), p.rawData());
  const void *pBuffer = p.rawData(), *mBuffer = m.rawData();
  std::vector<float> before(p.data<float>(), p.data<float>() + 64);
  // Handed over: the same buffers come back, holding the same values.
  auto donated = kernels::adamw(std::move(p), g, std::move(m), v, hyper);
  EXPECT_EQ(std::get<0>(donated).rawData(), pBuffer);
  EXPECT_EQ(std::get<1>(donated).rawData(), mBuffer);
  EXPECT_NE(std::get<2>(donated).rawData(), v.rawData()) << "v is still shared";
  for (int i = 0; i < 64; ++i) {
    EXPECT_EQ(std::get<0>(donated).data<float>()[i], std::get<0>(shared).data<float>()[i]);
    EXPECT_NE(std::get<0>(donated).data<float>()[i], before[i]);
  }
}

} // namespace
