//===- BlockwiseMoeTest.cpp - nkilib's blockwise MoE form vs Kiln's experts ===//
//
// The blockwise form is built here as nkilib's tests build it
// (test_bwmm_bwd_common.py, generate_token_position_to_id_and_experts: an
// expert's pairs in token order over ceil(c_e / B) blocks from its first,
// the spare blocks the last expert's, padding rows reading token T), by a
// plain sequential loop independent of the HLO lowering. The blockwise
// reference (BlockwiseMoe.h) on it must give Kiln's grouped experts; the
// block count must hold every routing and be reached by the worst one.
//
//===----------------------------------------------------------------------===//

#include "kiln/Runtime/BlockwiseMoe.h"
#include "TestUtil.h"
#include "kiln/Dialect/Kiln/IR/NkiBinding.h"
#include "kiln/Runtime/MoeKernels.h"
#include "kiln/Support/Error.h"

#include <algorithm>
#include <cmath>
#include <numeric>

using namespace kiln;
using namespace kiln::test;

namespace {

TEST(BlockwiseMoeTest, BlockCountHoldsTheWorstRoutingAndIsReached) {
  // nkilib's get_n_blocks: ceil((T * TOPK - (E - 1)) / B) + E - 1; the
  // seeds' reduced MoE: 4096 tokens x top-4 over 64 experts, B = 256.
  EXPECT_EQ(NkiBlockRouting::blockCount(4096 * 4, 64, 256), 127);
  for (int64_t experts : {1, 2, 3, 8})
    for (int64_t block : {1, 2, 4, 256})
      for (int64_t pairs = 1; pairs <= 40; ++pairs) {
        int64_t n = NkiBlockRouting::blockCount(pairs, experts, block);
        // The worst: one pair in each expert but one, the rest in it.
        int64_t ones = std::min(pairs - 1, experts - 1);
        int64_t worst = ones + (pairs - ones + block - 1) / block;
        EXPECT_EQ(n, std::max(worst, experts))
            << pairs << " pairs, " << experts << " experts, blocks of " << block;
      }
}

/// Float32 through different summation orders: |got - want| <= 1e-5 *
/// max(1, |want|).
double worstRelative(const std::vector<double> &got, const std::vector<double> &want) {
  EXPECT_EQ(got.size(), want.size());
  double worst = 0;
  for (size_t i = 0; i < std::min(got.size(), want.size()); ++i)
    worst = std::max(worst, std::abs(got[i] - want[i]) / std::max(1.0, std::abs(want[i])));
  return worst;
}

struct Blockwise {
  Tensor hidden, affinities, gateUp, down, positions, blockExperts;
};

/// The blockwise form of (x, weights, ids, w1, w3, w2), nkilib's way.
Blockwise blockwiseForm(const Tensor &x, const Tensor &weights, const Tensor &ids, const Tensor &w1,
                        const Tensor &w3, const Tensor &w2, int64_t block) {
  int64_t tokens = x.dim(0), hidden = x.dim(1), k = ids.dim(1), experts = w1.dim(0),
          inter = w1.dim(1);
  int64_t blocks = NkiBlockRouting::blockCount(tokens * k, experts, block);
  std::vector<std::vector<int64_t>> byExpert(static_cast<size_t>(experts));
  Blockwise f{Tensor(DType::F32, {tokens + 1, hidden}),
              Tensor(DType::F32, {(tokens + 1) * experts, 1}),
              Tensor(DType::F32, {experts, hidden, 2, inter}),
              Tensor(DType::F32, {experts, inter, hidden}),
              Tensor(DType::I32, {blocks * block}),
              Tensor(DType::I32, {blocks, 1})};
  std::copy(x.data<float>(), x.data<float>() + x.numel(), f.hidden.mutableData<float>());
  float *aff = f.affinities.mutableData<float>();
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t j = 0; j < k; ++j) {
      int64_t e = ids.data<int64_t>()[t * k + j];
      byExpert[size_t(e)].push_back(t);
      aff[t * experts + e] = weights.data<float>()[t * k + j];
    }
  for (int64_t e = 0; e < experts; ++e)
    for (int64_t h = 0; h < hidden; ++h)
      for (int64_t i = 0; i < inter; ++i) {
        float *gu = f.gateUp.mutableData<float>() + ((e * hidden + h) * 2) * inter;
        gu[i] = w1.data<float>()[(e * inter + i) * hidden + h];
        gu[inter + i] = w3.data<float>()[(e * inter + i) * hidden + h];
        f.down.mutableData<float>()[(e * inter + i) * hidden + h] =
            w2.data<float>()[(e * hidden + h) * inter + i];
      }
  int32_t *pos = f.positions.mutableData<int32_t>(), *be = f.blockExperts.mutableData<int32_t>();
  std::fill(pos, pos + blocks * block, int32_t(tokens));
  int64_t next = 0;
  for (int64_t e = 0; e < experts; ++e) {
    const std::vector<int64_t> &rows = byExpert[size_t(e)];
    int64_t own = (int64_t(rows.size()) + block - 1) / block;
    if (e == experts - 1)
      own = blocks - next; // the spare blocks
    for (size_t r = 0; r < rows.size(); ++r)
      pos[next * block + int64_t(r)] = int32_t(rows[r]);
    for (int64_t n = next; n < next + own; ++n)
      be[n] = int32_t(e);
    next += own;
  }
  return f;
}

/// A grouped-experts call with skewed routing: expert 0 takes most tokens
/// (several blocks), expert 4 none but the spare blocks.
struct Problem {
  static constexpr int64_t tokens = 37, hidden = 24, inter = 16, experts = 5, k = 2;
  Tensor x, w1, w3, w2, weights, ids;
  Problem();
};

Problem::Problem() {
  std::mt19937 rng(7);
  x = randomTensor({tokens, hidden}, rng);
  w1 = randomTensor({experts, inter, hidden}, rng, 0.3f);
  w3 = randomTensor({experts, inter, hidden}, rng, 0.3f);
  w2 = randomTensor({experts, hidden, inter}, rng, 0.3f);
  weights = Tensor(DType::F32, {tokens, k});
  ids = Tensor(DType::I64, {tokens, k});
  std::uniform_real_distribution<float> unit(0.1f, 1.0f);
  for (int64_t t = 0; t < tokens; ++t) {
    std::vector<int64_t> order{0, 1, 2, 3};
    std::shuffle(order.begin() + 1, order.end(), rng);
    int64_t first = t % 5 == 4 ? order[1] : 0;
    int64_t second = order[first == 0 ? 1 : 2];
    ids.mutableData<int64_t>()[t * k] = first;
    ids.mutableData<int64_t>()[t * k + 1] = second;
    weights.mutableData<float>()[t * k] = unit(rng);
    weights.mutableData<float>()[t * k + 1] = unit(rng);
  }
}

TEST(BlockwiseMoeTest, TheBlockwiseFormComputesKilnsGroupedExperts) {
  Problem p;
  const int64_t tokens = p.tokens, hidden = p.hidden;
  Tensor want = kernels::groupedExperts(p.x, p.weights, p.ids, p.w1, p.w3, p.w2);
  for (int64_t block : {4, 8, 64}) {
    SCOPED_TRACE("blocks of " + std::to_string(block));
    Blockwise f = blockwiseForm(p.x, p.weights, p.ids, p.w1, p.w3, p.w2, block);
    Tensor got = kernels::blockwiseMoe(f.hidden, f.affinities, f.gateUp, f.down, f.positions,
                                       f.blockExperts, block, false, "test")
                     .out;
    ASSERT_EQ(got.shape(), (Shape{tokens + 1, hidden}));
    std::vector<double> g = toDoubles(got), w = toDoubles(want);
    for (int64_t h = 0; h < hidden; ++h) // the padding row gets nothing
      EXPECT_EQ(g[size_t(tokens * hidden + h)], 0.0);
    g.resize(size_t(tokens * hidden));
    EXPECT_LE(worstRelative(g, w), 1e-5);
  }
}

// blockwise_mm_bwd on moe_cte's checkpoints gives Kiln's VJP: the tokens'
// rows, each pair's affinity entry, gate and up from [E, H, 2, I], down
// from [E, I, H].
TEST(BlockwiseMoeTest, TheBackwardOnTheCheckpointsIsKilnsVjp) {
  Problem p;
  const int64_t t = p.tokens, h = p.hidden, inter = p.inter, e = p.experts, k = p.k;
  std::mt19937 rng(3);
  Tensor dy = randomTensor({t, h}, rng);
  kernels::GroupedExpertsGrads want =
      kernels::groupedExpertsBackward(dy, p.x, p.weights, p.ids, p.w1, p.w3, p.w2);
  const int64_t block = 8;
  Blockwise f = blockwiseForm(p.x, p.weights, p.ids, p.w1, p.w3, p.w2, block);
  kernels::BlockwiseMoeOutputs fwd = kernels::blockwiseMoe(
      f.hidden, f.affinities, f.gateUp, f.down, f.positions, f.blockExperts, block, true, "test");
  int64_t blocks = f.blockExperts.numel();
  ASSERT_EQ(fwd.gateUpActivations.shape(), (Shape{blocks, 2, inter, block}));
  ASSERT_EQ(fwd.downActivations.shape(), (Shape{blocks, block, h}));
  Tensor dyRows(DType::F32, {t + 1, h});
  std::copy(dy.data<float>(), dy.data<float>() + dy.numel(), dyRows.mutableData<float>());
  kernels::BlockwiseMoeGrads g = kernels::blockwiseMoeBackward(
      f.hidden, f.affinities, f.gateUp, f.down, fwd.gateUpActivations, fwd.downActivations,
      f.positions, f.blockExperts, dyRows, block, "test");
  std::vector<double> dx = toDoubles(g.hidden), daff = toDoubles(g.affinities),
                      dgu = toDoubles(g.gateUp), ddown = toDoubles(g.down);
  dx.resize(size_t(t * h));
  EXPECT_LE(worstRelative(dx, toDoubles(want.x)), 1e-5);
  std::vector<double> dw(size_t(t * k)), d1(size_t(e * inter * h)), d3(d1.size()), d2(d1.size());
  for (int64_t i = 0; i < t * k; ++i)
    dw[size_t(i)] = daff[size_t((i / k) * e + p.ids.data<int64_t>()[i])];
  for (int64_t x = 0; x < e; ++x)
    for (int64_t i = 0; i < inter; ++i)
      for (int64_t c = 0; c < h; ++c) {
        d1[size_t((x * inter + i) * h + c)] = dgu[size_t(((x * h + c) * 2 + 0) * inter + i)];
        d3[size_t((x * inter + i) * h + c)] = dgu[size_t(((x * h + c) * 2 + 1) * inter + i)];
        d2[size_t((x * h + c) * inter + i)] = ddown[size_t((x * inter + i) * h + c)];
      }
  EXPECT_LE(worstRelative(dw, toDoubles(want.weights)), 1e-5);
  EXPECT_LE(worstRelative(d1, toDoubles(want.w1)), 1e-5);
  EXPECT_LE(worstRelative(d3, toDoubles(want.w3)), 1e-5);
  EXPECT_LE(worstRelative(d2, toDoubles(want.w2)), 1e-5);
  // Token 0's experts are 0 and one of 1-3: its entry for expert 4 gets nothing.
  EXPECT_EQ(daff[size_t(0 * e + 4)], 0.0);
}

TEST(BlockwiseMoeTest, BadRoutingIsAnErrorNamingTheCall) {
  std::mt19937 rng(1);
  Tensor x = randomTensor({4, 8}, rng), w1 = randomTensor({2, 4, 8}, rng),
         w2 = randomTensor({2, 8, 4}, rng);
  Tensor weights(DType::F32, {4, 1}), ids(DType::I64, {4, 1});
  for (int64_t t = 0; t < 4; ++t)
    ids.mutableData<int64_t>()[t] = t % 2, weights.mutableData<float>()[t] = 1.0f;
  Blockwise f = blockwiseForm(x, weights, ids, w1, w1, w2, 2);
  f.blockExperts.mutableData<int32_t>()[0] = 2;
  EXPECT_THROW(
      try {
        kernels::blockwiseMoe(f.hidden, f.affinities, f.gateUp, f.down, f.positions, f.blockExperts,
                              2, false, "custom-call.7");
      } catch (const Error &e) {
        EXPECT_NE(std::string(e.what()).find("custom-call.7: block 0 is expert 2, not one of 2"),
                  std::string::npos)
            << e.what();
        throw;
      },
      Error);
  f.blockExperts.mutableData<int32_t>()[0] = 0;
  f.positions.mutableData<int32_t>()[1] = 5;
  EXPECT_THROW(kernels::blockwiseMoe(f.hidden, f.affinities, f.gateUp, f.down, f.positions,
                                     f.blockExperts, 2, false, "custom-call.7"),
               Error);
}

} // namespace
