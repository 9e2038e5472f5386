//===- FlashAttentionTest.cpp - Tiled attention vs the reference kernels --===//
//
// flashAttention / flashAttentionBackward ([b, h, s, d]) against
// kernels::attention / attentionBackward ([b, s, h, d]) with the layouts
// permuted here, over causal and full masks, GQA groups 1/2/4, sequences that
// are not multiples of the block sizes, and head dims 64/128; then against
// central finite differences of a naive float64 attention on a tiny case.
//
//===----------------------------------------------------------------------===//

#include "TestUtil.h"
#include "kiln/Runtime/BackwardKernels.h"
#include "kiln/Runtime/FlashAttention.h"
#include "kiln/Runtime/ForwardKernels.h"

#include <omp.h>

#include <cstring>
#include <tuple>

using namespace kiln;
using namespace kiln::test;
/// [b, s, h, d] <-> [b, h, s, d] with the transpose the IR inserts.
Tensor swapMiddleDims(const Tensor &t) { return kiln::kernels::transpose(t, {0, 2, 1, 3}); }

namespace {

/// Versus the f32 reference kernels (absolute): both are f32 with different
/// summation orders and exp implementations (expNonPositive is within 3e-7
/// relative of exp); with N(0, 1) inputs and scale 1/sqrt(d) outputs and lse
/// are up to ~4 (ulp 4.8e-7) and the largest gap seen is 1.2e-6.
constexpr double kForwardTol = 2e-6;
/// Gradients sum s (and, for dk/dv, group * s) block products, so they are
/// larger and carry proportionally more rounding; largest gap seen 1.4e-6.
constexpr double kBackwardTol = 1e-5;
/// Versus float64 (absolute): the float32 rounding above plus O(step^2)
/// truncation of central differences, ~1e-8 at step 1e-4; seen 2.4e-7.
constexpr double kFloat64Tol = 1e-6;

TEST(FlashAttentionTest, TransposeSwapsHeadsAndPositions) {
  std::mt19937 rng(20);
  Tensor t = randomTensor({2, 3, 5, 4}, rng), s = swapMiddleDims(t);
  ASSERT_EQ(s.shape(), (Shape{2, 5, 3, 4}));
  for (int64_t a = 0; a < 2; ++a)
    for (int64_t x = 0; x < 3; ++x)
      for (int64_t y = 0; y < 5; ++y)
        for (int64_t e = 0; e < 4; ++e)
          ASSERT_EQ(s.data<float>()[((a * 5 + y) * 3 + x) * 4 + e],
                    t.data<float>()[((a * 3 + x) * 5 + y) * 4 + e]);
}

struct Case {
  int64_t seq, group, headDim;
  bool causal;
};

std::string caseName(const ::testing::TestParamInfo<Case> &info) {
  const Case &c = info.param;
  return "s" + std::to_string(c.seq) + "_g" + std::to_string(c.group) + "_d" +
         std::to_string(c.headDim) + (c.causal ? "_causal" : "_full");
}

class FlashAttentionVsReference : public ::testing::TestWithParam<Case> {};

TEST_P(FlashAttentionVsReference, ForwardAndBackwardMatch) {
  const Case c = GetParam();
  const int64_t batch = 2, kvHeads = 2, heads = kvHeads * c.group, S = c.seq, D = c.headDim;
  const float scale = 1.0f / std::sqrt(float(D));
  std::mt19937 rng(uint32_t(S * 1000 + c.group * 10 + D));
  const Shape qShape{batch, heads, S, D}, kvShape{batch, kvHeads, S, D};
  Tensor q = randomTensor(qShape, rng), k = randomTensor(kvShape, rng),
         v = randomTensor(kvShape, rng), dy = randomTensor(qShape, rng);

  auto [out, lse] = kernels::flashAttention(q, k, v, c.causal, scale);
  Tensor qr = swapMiddleDims(q), kr = swapMiddleDims(k), vr = swapMiddleDims(v);
  auto [refOut, refLse] = kernels::attention(qr, kr, vr, c.causal, scale);
  ASSERT_EQ(out.shape(), q.shape());
  ASSERT_EQ(lse.shape(), (Shape{batch, heads, S}));
  EXPECT_LT(maxAbsDiff(toDoubles(out), toDoubles(swapMiddleDims(refOut))), kForwardTol);
  EXPECT_LT(maxAbsDiff(toDoubles(lse), toDoubles(refLse)), kForwardTol);

  auto [dq, dk, dv] = kernels::flashAttentionBackward(dy, q, k, v, out, lse, c.causal, scale);
  auto [refDq, refDk, refDv] = kernels::attentionBackward(swapMiddleDims(dy), qr, kr, vr, refOut,
                                                          refLse, c.causal, scale);
  EXPECT_LT(maxAbsDiff(toDoubles(dq), toDoubles(swapMiddleDims(refDq))), kBackwardTol);
  EXPECT_LT(maxAbsDiff(toDoubles(dk), toDoubles(swapMiddleDims(refDk))), kBackwardTol);
  EXPECT_LT(maxAbsDiff(toDoubles(dv), toDoubles(swapMiddleDims(refDv))), kBackwardTol);
}

std::vector<Case> allCases() {
  std::vector<Case> cases;
  for (int64_t seq : {1, 37, 130})
    for (int64_t group : {1, 2, 4})
      for (int64_t d : {64, 128})
        for (bool causal : {true, false})
          cases.push_back({seq, group, d, causal});
  return cases;
}
INSTANTIATE_TEST_SUITE_P(FlashAttentionTest, FlashAttentionVsReference,
                         ::testing::ValuesIn(allCases()), caseName);

/// Runs forward + backward and returns every output.
std::vector<Tensor> runBoth(const Tensor &q, const Tensor &k, const Tensor &v, const Tensor &dy,
                            bool causal, kernels::FlashBlocks blocks) {
  auto [out, lse] = kernels::flashAttention(q, k, v, causal, 0.3f, blocks);
  auto [dq, dk, dv] = kernels::flashAttentionBackward(dy, q, k, v, out, lse, causal, 0.3f, blocks);
  return {out, lse, dq, dk, dv};
}

TEST(FlashAttentionTest, BlockSizesOnlyChangeRounding) {
  // Unequal and tiny blocks put the causal diagonal at every offset within a
  // block; the results must agree with the default tiling.
  std::mt19937 rng(21);
  Tensor q = randomTensor({1, 4, 37, 16}, rng), k = randomTensor({1, 2, 37, 16}, rng),
         v = randomTensor({1, 2, 37, 16}, rng), dy = randomTensor({1, 4, 37, 16}, rng);
  for (bool causal : {true, false}) {
    std::vector<Tensor> want = runBoth(q, k, v, dy, causal, {});
    for (kernels::FlashBlocks blocks : {kernels::FlashBlocks{16, 8}, kernels::FlashBlocks{8, 16},
                                        kernels::FlashBlocks{5, 3}, kernels::FlashBlocks{1, 1}}) {
      std::vector<Tensor> got = runBoth(q, k, v, dy, causal, blocks);
      for (size_t i = 0; i < got.size(); ++i)
        EXPECT_LT(maxAbsDiff(toDoubles(got[i]), toDoubles(want[i])),
                  i < 2 ? kForwardTol : kBackwardTol)
            << "output " << i << " blocks " << blocks.queries << "x" << blocks.keys
            << " causal " << causal;
    }
  }
}

TEST(FlashAttentionTest, ResultsAreBitwiseIndependentOfThreadCount) {
  std::mt19937 rng(22);
  Tensor q = randomTensor({2, 4, 70, 32}, rng), k = randomTensor({2, 2, 70, 32}, rng),
         v = randomTensor({2, 2, 70, 32}, rng), dy = randomTensor({2, 4, 70, 32}, rng);
  int previous = omp_get_max_threads();
  omp_set_num_threads(1);
  std::vector<Tensor> one = runBoth(q, k, v, dy, true, {16, 32});
  omp_set_num_threads(3);
  std::vector<Tensor> three = runBoth(q, k, v, dy, true, {16, 32});
  omp_set_num_threads(previous);
  for (size_t i = 0; i < one.size(); ++i)
    EXPECT_EQ(std::memcmp(one[i].rawData(), three[i].rawData(), one[i].nbytes()), 0)
        << "output " << i;
}

/// Naive float64 attention in [b, h, s, d]: out and lse.
struct Float64Attention {
  int64_t B, H, KV, S, D;
  bool causal;
  double scale;

  std::pair<std::vector<double>, std::vector<double>>
  operator()(const std::vector<double> &q, const std::vector<double> &k,
             const std::vector<double> &v) const {
    std::vector<double> out(B * H * S * D, 0.0), lse(B * H * S);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t i = 0; i < S; ++i) {
          const int64_t n = causal ? i + 1 : S, qi = ((b * H + h) * S + i) * D;
          auto kvAt = [&](int64_t j) { return ((b * KV + h / (H / KV)) * S + j) * D; };
          std::vector<double> s(n, 0.0);
          for (int64_t j = 0; j < n; ++j)
            for (int64_t e = 0; e < D; ++e)
              s[j] += scale * q[qi + e] * k[kvAt(j) + e];
          double mx = *std::max_element(s.begin(), s.end()), sum = 0;
          for (double x : s)
            sum += std::exp(x - mx);
          lse[(b * H + h) * S + i] = mx + std::log(sum);
          for (int64_t j = 0; j < n; ++j)
            for (int64_t e = 0; e < D; ++e)
              out[qi + e] += std::exp(s[j] - mx) / sum * v[kvAt(j) + e];
        }
    return {out, lse};
  }
};

TEST(FlashAttentionTest, MatchesFiniteDifferencesOfFloat64Reference) {
  std::mt19937 rng(23);
  const int64_t B = 1, H = 4, KV = 2, S = 6, D = 4;
  Tensor q = randomTensor({B, H, S, D}, rng), k = randomTensor({B, KV, S, D}, rng),
         v = randomTensor({B, KV, S, D}, rng), dy = randomTensor({B, H, S, D}, rng);
  const std::vector<double> dys = toDoubles(dy);
  for (bool causal : {true, false}) {
    SCOPED_TRACE(causal ? "causal" : "full");
    const Float64Attention ref{B, H, KV, S, D, causal, 0.3};
    // 4x3 blocks: several query and key blocks, the diagonal mid-block.
    std::vector<Tensor> got = runBoth(q, k, v, dy, causal, {4, 3});
    std::vector<double> qs = toDoubles(q), ks = toDoubles(k), vs = toDoubles(v);
    auto [refOut, refLse] = ref(qs, ks, vs);
    EXPECT_LT(maxAbsDiff(toDoubles(got[0]), refOut), kFloat64Tol);
    EXPECT_LT(maxAbsDiff(toDoubles(got[1]), refLse), kFloat64Tol);
    // L = sum(dy * out); dL/dx by central differences, x in {q, k, v}.
    auto loss = [&] {
      std::vector<double> out = ref(qs, ks, vs).first;
      double sum = 0;
      for (size_t i = 0; i < out.size(); ++i)
        sum += dys[i] * out[i];
      return sum;
    };
    std::vector<double> *inputs[] = {&qs, &ks, &vs};
    for (int which = 0; which < 3; ++which) {
      std::vector<double> fd = centralDifferences(*inputs[which], loss);
      EXPECT_LT(maxAbsDiff(toDoubles(got[2 + which]), fd), kFloat64Tol) << "input " << which;
    }
  }
}

} // namespace
