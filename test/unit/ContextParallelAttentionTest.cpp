//===- ContextParallelAttentionTest.cpp - Attention on sequence blocks ----===//
//
// Context parallelism's attention: each of cp ranks holds a block of the
// queries and the whole (gathered) keys and values; the sequence may be laid
// out head-tail. Checked on 1-4 blocks, causal and full, GQA, against the
// float64 reference of the whole sequence in its natural order: the CPU
// kernels and the HLO lowering (evaluated on every rank), forward and
// backward, the key and value gradients summed over the blocks.
//
//===----------------------------------------------------------------------===//

#include "AttentionReference.h"
#include "HloTestUtil.h"
#include "TestUtil.h"
#include "kiln/Backend/Neuron/HloEvaluator.h"
#include "kiln/Backend/Neuron/HloExport.h"
#include "kiln/Dialect/Hlo/IR/HloOps.h"
#include "kiln/Dialect/Kiln/IR/KilnDialect.h"
#include "kiln/Dialect/Kiln/IR/KilnOps.h"
#include "kiln/Pipeline/KilnPipeline.h"
#include "kiln/Runtime/BackwardKernels.h"
#include "kiln/Runtime/ForwardKernels.h"
#include "kiln/Support/SequenceLayout.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

#include <numeric>
#include <sstream>

using namespace kiln;
using namespace kiln::test;

namespace {

constexpr double kTol = 1e-5;
constexpr float kScale = 0.35f;

// Worked by hand: 8 rows in 4 chunks of 2 (cp = 2). Rank 0 holds layout
// chunks 0 and 1 = true chunks 0 and 3; rank 1 holds true chunks 1 and 2.
TEST(SequenceLayoutTest, HeadTailGivesEachRankAHeadAndATailChunk) {
  SequenceLayout headTail{4};
  EXPECT_EQ(headTail.positions(0, 8, 8), (std::vector<int64_t>{0, 1, 6, 7, 2, 3, 4, 5}));
  EXPECT_EQ(headTail.positions(4, 4, 8), (std::vector<int64_t>{2, 3, 4, 5}));
  EXPECT_EQ(SequenceLayout{}.positions(2, 3, 8), (std::vector<int64_t>{2, 3, 4}));
  // A permutation of the sequence for every even chunk count dividing it.
  for (int64_t chunks : {2, 4, 6, 8}) {
    std::vector<int64_t> p = SequenceLayout{chunks}.positions(0, 24, 24);
    std::sort(p.begin(), p.end());
    std::vector<int64_t> iota(24);
    std::iota(iota.begin(), iota.end(), 0);
    EXPECT_EQ(p, iota) << chunks << " chunks";
  }
}

/// Causal pairs rank r scores when each of `cp` ranks holds a block of the
/// 24-row sequence laid out as `layout`.
std::vector<int64_t> causalPairsPerRank(int64_t cp, SequenceLayout layout) {
  std::vector<int64_t> pairs(cp);
  int64_t seq = 24, block = seq / cp;
  for (int64_t x = 0; x < seq; ++x)
    pairs[x / block] += layout.position(x, seq) + 1; // keys at or before it
  return pairs;
}

// The point of the head-tail layout: every rank scores the same number of
// causal pairs; in natural order the last rank scores the most.
TEST(SequenceLayoutTest, HeadTailBalancesTheCausalWork) {
  for (int64_t cp : {2, 3, 4}) {
    std::vector<int64_t> balanced = causalPairsPerRank(cp, SequenceLayout{2 * cp});
    EXPECT_EQ(std::set<int64_t>(balanced.begin(), balanced.end()).size(), 1u) << "cp " << cp;
    EXPECT_EQ(std::accumulate(balanced.begin(), balanced.end(), int64_t(0)), 24 * 25 / 2);
    std::vector<int64_t> natural = causalPairsPerRank(cp, SequenceLayout{});
    EXPECT_TRUE(std::is_sorted(natural.begin(), natural.end())) << "cp " << cp;
    EXPECT_GT(natural.back(), 2 * natural.front()) << "cp " << cp;
  }
}

// The cost of attention on a block of the queries: its share of the pairs,
// so cp blocks of a sequence cost what the whole sequence costs.
TEST(SequenceLayoutTest, AQueryBlockCostsItsShareOfTheSequence) {
  mlir::MLIRContext context;
  context.loadDialect<mlir::func::FuncDialect, KilnDialect>();
  mlir::OwningOpRef<mlir::ModuleOp> module = mlir::parseSourceString<mlir::ModuleOp>(R"(
    func.func @f(%q: tensor<2x64x4x8xf32>, %qb: tensor<2x16x4x8xf32>, %k: tensor<2x64x2x8xf32>) {
      %o, %l = kiln.attention %q, %k, %k {causal, scale = 0.35 : f32, fqn = "whole"}
          : (tensor<2x64x4x8xf32>, tensor<2x64x2x8xf32>, tensor<2x64x2x8xf32>) -> (tensor<2x64x4x8xf32>, tensor<2x4x64xf32>)
      %ob, %lb = kiln.attention %qb, %k, %k {causal, scale = 0.35 : f32, fqn = "block", query_axes = array<i16: 0>}
          : (tensor<2x16x4x8xf32>, tensor<2x64x2x8xf32>, tensor<2x64x2x8xf32>) -> (tensor<2x16x4x8xf32>, tensor<2x4x16xf32>)
      return
    })",
                                                                                     &context);
  ASSERT_TRUE(module);
  std::vector<AttentionOp> ops;
  module->walk([&](AttentionOp op) { ops.push_back(op); });
  ASSERT_EQ(ops.size(), 2u);
  // 2 x 4 heads x 64 * 65 / 2 causal pairs x (4 x 8 + 5) FLOPs each.
  EXPECT_DOUBLE_EQ(ops[0].getFlops(), 2.0 * 4 * 64 * 65 / 2 * (4 * 8 + 5));
  EXPECT_DOUBLE_EQ(4 * ops[1].getFlops(), ops[0].getFlops());
}

/// `t` [B, S, ...] with the rows `rows` of dimension 1, in that order.
Tensor takeRows(const Tensor &t, const std::vector<int64_t> &rows) {
  int64_t batch = t.dim(0), seq = t.dim(1), inner = t.numel() / (batch * seq);
  Shape shape = t.shape();
  shape[1] = int64_t(rows.size());
  Tensor out(DType::F32, shape);
  for (int64_t b = 0; b < batch; ++b)
    for (size_t i = 0; i < rows.size(); ++i)
      std::copy_n(t.data<float>() + (b * seq + rows[i]) * inner, inner,
                  out.mutableData<float>() + (b * int64_t(rows.size()) + int64_t(i)) * inner);
  return out;
}

/// The same selection of a float64 [outer, S, inner] array.
std::vector<double> takeRows(const std::vector<double> &x, int64_t outer, int64_t seq,
                             const std::vector<int64_t> &rows) {
  int64_t inner = int64_t(x.size()) / (outer * seq);
  std::vector<double> out;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t r : rows)
      out.insert(out.end(), x.begin() + (o * seq + r) * inner,
                 x.begin() + (o * seq + r + 1) * inner);
  return out;
}

// The rope table under head-tail load balancing: row i holds the true
// position of layout row i, on the CPU kernel and in the HLO lowering.
TEST(SequenceLayoutTest, RopeTableFollowsTheHeadTailLayout) {
  std::vector<float> invFreq = {1.0f, 0.1f, 0.01f};
  Tensor natural = kernels::ropeCache(invFreq, 12);
  SequenceLayout layout{6};
  Tensor laidOut = kernels::ropeCache(invFreq, 12, layout);
  for (int64_t r = 0; r < 12; ++r)
    for (int64_t c = 0; c < 12; ++c)
      EXPECT_EQ(laidOut.data<float>()[r * 12 + c],
                natural.data<float>()[layout.position(r, 12) * 12 + c])
          << "row " << r << " column " << c;
  mlir::MLIRContext context;
  context.loadDialect<hlo::HloDialect, mlir::func::FuncDialect, KilnDialect>();
  mlir::OwningOpRef<mlir::ModuleOp> module = mlir::parseSourceString<mlir::ModuleOp>(R"(
    func.func @train_step() -> tensor<12x12xf32> {
      %c = kiln.rope_cache {theta = 1.0e4 : f64, seq_len = 12 : i64, head_dim = 6 : i64,
                            head_tail_chunks = 6 : i64, fqn = "rope_cache"} : tensor<12x12xf32>
      return %c : tensor<12x12xf32>
    })",
                                                                                     &context);
  ASSERT_TRUE(module);
  std::optional<xla::HloModuleProto> proto = test::perRankHlo(*module, "train_step");
  ASSERT_TRUE(proto);
  auto out = neuron::evaluateHlo(*proto, {{neuron::HloArray{xla::S32, {}, {0}}}});
  Tensor expected = kernels::ropeCache(1e4, 12, 6);
  std::vector<int64_t> order = layout.positions(0, 12, 12);
  EXPECT_LT(maxAbsDiff(out[0][0].values, takeRows(toDoubles(expected), 1, 12, order)), 1e-6);
}

struct Case {
  int64_t cp;
  bool headTail, causal;
};
void PrintTo(const Case &c, std::ostream *os) {
  *os << "cp " << c.cp << (c.headTail ? " head-tail" : " natural")
      << (c.causal ? " causal" : " full");
}
std::string caseName(const ::testing::TestParamInfo<Case> &info) {
  return "cp" + std::to_string(info.param.cp) + (info.param.headTail ? "HeadTail" : "Natural") +
         (info.param.causal ? "Causal" : "Full");
}

/// One case's tensors: the natural sequence, its layout and its reference.
struct Blocks {
  static constexpr int64_t kBatch = 2, kSeq = 24, kHeads = 4, kKvHeads = 2, kDim = 8;
  Case c;
  SequenceLayout layout;
  std::vector<int64_t> order; // true position of each layout row
  Tensor q, k, v, dout;       // laid out
  AttentionReference ref;     // of the natural sequence

  explicit Blocks(Case c) : c(c), layout{c.headTail ? 2 * c.cp : 0} {
    std::mt19937 rng(40 + c.cp);
    Tensor qn = randomTensor({kBatch, kSeq, kHeads, kDim}, rng),
           kn = randomTensor({kBatch, kSeq, kKvHeads, kDim}, rng),
           vn = randomTensor({kBatch, kSeq, kKvHeads, kDim}, rng),
           don = randomTensor({kBatch, kSeq, kHeads, kDim}, rng);
    ref = attentionReference(qn, kn, vn, &don, c.causal, kScale);
    order = layout.positions(0, kSeq, kSeq);
    q = takeRows(qn, order);
    k = takeRows(kn, order);
    v = takeRows(vn, order);
    dout = takeRows(don, order);
  }
  int64_t block() const { return kSeq / c.cp; }
  /// The true positions of rank r's queries.
  std::vector<int64_t> rowsOf(int64_t r) const {
    return {order.begin() + r * block(), order.begin() + (r + 1) * block()};
  }
  std::vector<int64_t> layoutRowsOf(int64_t r) const {
    std::vector<int64_t> rows(block());
    std::iota(rows.begin(), rows.end(), r * block());
    return rows;
  }
  /// Expected per-rank results: out, lse and dq of rank r's queries.
  void expectRank(int64_t r, const std::vector<double> &out, const std::vector<double> &lse,
                  const std::vector<double> &dq) const {
    SCOPED_TRACE("rank " + std::to_string(r));
    std::vector<int64_t> rows = rowsOf(r);
    EXPECT_LT(maxAbsDiff(out, takeRows(ref.out, kBatch, kSeq, rows)), kTol);
    EXPECT_LT(maxAbsDiff(lse, takeRows(ref.lse, kBatch * kHeads, kSeq, rows)), kTol);
    EXPECT_LT(maxAbsDiff(dq, takeRows(ref.dq, kBatch, kSeq, rows)), kTol);
  }
  /// The key and value gradients summed over the ranks, laid out.
  void expectSums(const std::vector<double> &dk, const std::vector<double> &dv) const {
    EXPECT_LT(maxAbsDiff(dk, takeRows(ref.dk, kBatch, kSeq, order)), kTol);
    EXPECT_LT(maxAbsDiff(dv, takeRows(ref.dv, kBatch, kSeq, order)), kTol);
  }
};

void addTo(std::vector<double> &sum, const std::vector<double> &x) {
  sum.resize(x.size());
  for (size_t i = 0; i < x.size(); ++i)
    sum[i] += x[i];
}

class ContextParallelAttention : public ::testing::TestWithParam<Case> {};

TEST_P(ContextParallelAttention, CpuKernelsOnEachBlockMatchTheWholeSequence) {
  Blocks t(GetParam());
  std::vector<double> dk, dv;
  for (int64_t r = 0; r < t.c.cp; ++r) {
    kernels::AttentionBlock block{r * t.block(), t.layout};
    Tensor q = takeRows(t.q, t.layoutRowsOf(r)), dout = takeRows(t.dout, t.layoutRowsOf(r));
    auto [out, lse] = kernels::attention(q, t.k, t.v, t.c.causal, kScale, block);
    auto [dq, dkr, dvr] =
        kernels::attentionBackward(dout, q, t.k, t.v, out, lse, t.c.causal, kScale, block);
    EXPECT_EQ(lse.shape(), (Shape{Blocks::kBatch, Blocks::kHeads, t.block()}));
    t.expectRank(r, toDoubles(out), toDoubles(lse), toDoubles(dq));
    addTo(dk, toDoubles(dkr));
    addTo(dv, toDoubles(dvr));
  }
  t.expectSums(dk, dv);
}

/// kiln.attention and its backward on the rank's query block of a grid of
/// cp ranks, as kiln-partition leaves them.
std::string blockModule(const Blocks &t) {
  auto type = [](int64_t seq, int64_t heads) {
    return "tensor<" + std::to_string(Blocks::kBatch) + "x" + std::to_string(seq) + "x" +
           std::to_string(heads) + "x" + std::to_string(Blocks::kDim) + "xf32>";
  };
  std::string q = type(t.block(), Blocks::kHeads), kv = type(Blocks::kSeq, Blocks::kKvHeads);
  std::string lse = "tensor<" + std::to_string(Blocks::kBatch) + "x" +
                    std::to_string(Blocks::kHeads) + "x" + std::to_string(t.block()) + "xf32>";
  std::ostringstream attrs;
  attrs << (t.c.causal ? "causal, " : "") << "scale = " << kScale
        << " : f32, fqn = \"layers.0.attention.inner_attention\"";
  if (t.c.cp > 1)
    attrs << ", query_axes = array<i16: 0>";
  if (t.layout.headTailChunks)
    attrs << ", head_tail_chunks = " << t.layout.headTailChunks << " : i64";
  std::ostringstream m;
  m << "shard.grid @grid(shape = " << t.c.cp << ")\n"
    << "func.func @train_step(%q: " << q << ", %k: " << kv << ", %v: " << kv << ", %do: " << q
    << ") -> (" << q << ", " << lse << ", " << q << ", " << kv << ", " << kv << ") {\n"
    << "  %o, %lse = kiln.attention %q, %k, %v {" << attrs.str() << "} : (" << q << ", " << kv
    << ", " << kv << ") -> (" << q << ", " << lse << ")\n"
    << "  %dq, %dk, %dv = kiln.attention_backward %do, %q, %k, %v, %o, %lse {" << attrs.str()
    << "} : (" << q << ", " << q << ", " << kv << ", " << kv << ", " << q << ", " << lse << ") -> ("
    << q << ", " << kv << ", " << kv << ")\n"
    << "  return %o, %lse, %dq, %dk, %dv : " << q << ", " << lse << ", " << q << ", " << kv << ", "
    << kv << "\n}\n";
  return m.str();
}

neuron::HloArray hloArray(const Tensor &t) {
  neuron::HloArray a;
  a.dims.assign(t.shape().begin(), t.shape().end());
  a.values = toDoubles(t);
  return a;
}

TEST_P(ContextParallelAttention, HloOnEachRankMatchesTheWholeSequence) {
  Blocks t(GetParam());
  mlir::MLIRContext context;
  context.loadDialect<hlo::HloDialect, mlir::func::FuncDialect, mlir::shard::ShardDialect,
                      KilnDialect>();
  std::string text = blockModule(t);
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceString<mlir::ModuleOp>(text, &context);
  ASSERT_TRUE(module) << text;
  std::optional<xla::HloModuleProto> proto = test::perRankHlo(*module, "train_step");
  ASSERT_TRUE(proto);
  std::vector<std::vector<neuron::HloArray>> args;
  for (int64_t r = 0; r < t.c.cp; ++r)
    args.push_back({hloArray(takeRows(t.q, t.layoutRowsOf(r))), hloArray(t.k), hloArray(t.v),
                    hloArray(takeRows(t.dout, t.layoutRowsOf(r))),
                    neuron::HloArray{xla::S32, {}, {double(r)}}});
  auto out = neuron::evaluateHlo(*proto, args);
  ASSERT_EQ(int64_t(out.size()), t.c.cp);
  std::vector<double> dk, dv;
  for (int64_t r = 0; r < t.c.cp; ++r) {
    t.expectRank(r, out[r][0].values, out[r][1].values, out[r][2].values);
    addTo(dk, out[r][3].values);
    addTo(dv, out[r][4].values);
  }
  t.expectSums(dk, dv);
}

std::vector<Case> cases() {
  std::vector<Case> all;
  for (int64_t cp : {1, 2, 3, 4})
    for (bool headTail : {false, true})
      all.push_back({cp, headTail, true});
  all.push_back({2, false, false});
  all.push_back({4, true, false});
  return all;
}
INSTANTIATE_TEST_SUITE_P(ContextParallelAttentionTest, ContextParallelAttention,
                         ::testing::ValuesIn(cases()), caseName);

} // namespace
