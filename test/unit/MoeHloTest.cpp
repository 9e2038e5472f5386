//===- MoeHloTest.cpp - The MoE ops' HLO lowering against the CPU kernels -===//
//
// kiln-lower-to-hlo's router, grouped experts, load-balancing loss and
// expert-bias update (and gradients), exported and run by the reference
// evaluator, must give lib/Runtime/MoeKernels.cpp's results: the same
// expert ids (ties to the lower id, the expert bias steering the choice)
// and values within 1e-5.
//
//===----------------------------------------------------------------------===//

#include "TestUtil.h"

#include "kiln/Backend/Neuron/HloEvaluator.h"
#include "kiln/Backend/Neuron/HloExport.h"
#include "kiln/Dialect/Hlo/IR/HloOps.h"
#include "kiln/Dialect/Kiln/IR/KilnDialect.h"
#include "kiln/Dialect/Hlo/IR/HloOps.h"
#include "kiln/Dialect/Kiln/IR/KilnDialect.h"
#include "kiln/Pipeline/KilnPipeline.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "kiln/Runtime/ExpertDispatchKernels.h"
#include "kiln/Runtime/MoeKernels.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

#include <fmt/format.h>

using namespace kiln;
using namespace kiln::test;

namespace {

// Tokens [2, 5], hidden 8, 4 experts of intermediate 6, top-2.
const char *kMoeStep = R"(
func.func @train_step(%logits: tensor<2x5x4xf32>, %bias: tensor<4xf32>, %x: tensor<2x5x8xf32>,
                      %w1: tensor<4x6x8xf32>, %w3: tensor<4x6x8xf32>, %w2: tensor<4x8x6xf32>,
                      %dy: tensor<2x5x8xf32>, %dprobs: tensor<2x5x4xf32>, %dloss: tensor<f32>)
    -> (tensor<2x5x2xf32>, tensor<2x5x2xi64>, tensor<2x5x4xf32>, tensor<2x5x8xf32>,
        tensor<2x5x8xf32>, tensor<2x5x2xf32>, tensor<4x6x8xf32>, tensor<4x6x8xf32>,
        tensor<4x8x6xf32>, tensor<2x5x4xf32>, tensor<f32>, tensor<2x5x4xf32>, tensor<4xf32>,
        tensor<f32>) {
  %w, %ids, %p = kiln.router %logits, %bias {norm_topk_prob, top_k = 2 : i64, fqn = "moe.router"}
      : (tensor<2x5x4xf32>, tensor<4xf32>) -> (tensor<2x5x2xf32>, tensor<2x5x2xi64>, tensor<2x5x4xf32>)
  %y = kiln.grouped_experts %x, %w, %ids, %w1, %w3, %w2 {fqn = "moe.experts"}
      : (tensor<2x5x8xf32>, tensor<2x5x2xf32>, tensor<2x5x2xi64>, tensor<4x6x8xf32>,
         tensor<4x6x8xf32>, tensor<4x8x6xf32>) -> tensor<2x5x8xf32>
  %dx, %dw, %dw1, %dw3, %dw2 = kiln.grouped_experts_backward %dy, %x, %w, %ids, %w1, %w3, %w2
      {fqn = "moe.experts"}
      : (tensor<2x5x8xf32>, tensor<2x5x8xf32>, tensor<2x5x2xf32>, tensor<2x5x2xi64>,
         tensor<4x6x8xf32>, tensor<4x6x8xf32>, tensor<4x8x6xf32>)
      -> (tensor<2x5x8xf32>, tensor<2x5x2xf32>, tensor<4x6x8xf32>, tensor<4x6x8xf32>,
          tensor<4x8x6xf32>)
  %dlogits = kiln.router_backward %p, %ids, %dw, %dprobs {norm_topk_prob, fqn = "moe.router"}
      : (tensor<2x5x4xf32>, tensor<2x5x2xi64>, tensor<2x5x2xf32>, tensor<2x5x4xf32>) -> tensor<2x5x4xf32>
  %aux = kiln.load_balancing_loss %p, %ids {fqn = "aux_loss"}
      : (tensor<2x5x4xf32>, tensor<2x5x2xi64>) -> tensor<f32>
  %daux = kiln.load_balancing_loss_backward %dloss, %ids {num_experts = 4 : i64, fqn = "aux_loss"}
      : (tensor<f32>, tensor<2x5x2xi64>) -> tensor<2x5x4xf32>
  %b2 = kiln.expert_bias_update %bias, %ids {coeff = 1.0e-3 : f64, fqn = "moe.router"}
      : (tensor<4xf32>, tensor<2x5x2xi64>) -> tensor<4xf32>
  %scaled = kiln.scale %aux {factor = 0.01 : f64, fqn = "aux_loss.scaled"} : (tensor<f32>) -> tensor<f32>
  return %w, %ids, %p, %y, %dx, %dw, %dw1, %dw3, %dw2, %dlogits, %aux, %daux, %b2, %scaled
      : tensor<2x5x2xf32>, tensor<2x5x2xi64>, tensor<2x5x4xf32>, tensor<2x5x8xf32>,
        tensor<2x5x8xf32>, tensor<2x5x2xf32>, tensor<4x6x8xf32>, tensor<4x6x8xf32>,
        tensor<4x8x6xf32>, tensor<2x5x4xf32>, tensor<f32>, tensor<2x5x4xf32>, tensor<4xf32>,
        tensor<f32>
}
)";

neuron::HloArray arrayOf(const Tensor &t) {
  neuron::HloArray a;
  a.dims = t.shape();
  a.values = toDoubles(t);
  if (t.dtype() == DType::I64)
    a.type = xla::S32; // kiln-hlo-narrow-int64's parameter type
  return a;
}

/// `text`'s @train_step lowered by kiln-lower-to-hlo, exported, and
/// evaluated on `args` (one list per rank; each rank's id is appended, the
/// rank parameter the lowering adds).
std::vector<std::vector<neuron::HloArray>>
lowerAndEvaluate(const std::string &text, std::vector<std::vector<neuron::HloArray>> args) {
  for (size_t r = 0; r < args.size(); ++r)
    args[r].push_back(neuron::HloArray{xla::S32, {}, {double(r)}});
  mlir::MLIRContext context;
  context.loadDialect<KilnDialect, hlo::HloDialect, mlir::func::FuncDialect,
                      mlir::shard::ShardDialect>();
  mlir::OwningOpRef<mlir::ModuleOp> module = mlir::parseSourceString<mlir::ModuleOp>(text, &context);
  if (!module)
    ADD_FAILURE() << "the test module does not parse";
  mlir::PassManager pm(&context);
  buildKilnPipeline(pm, KilnPipelineOptions(), LoweringStage::Hlo, LoweringStage::PerRank);
  if (!module || mlir::failed(pm.run(*module)))
    return {};
  mlir::FailureOr<xla::HloModuleProto> proto = neuron::exportHloModule(*module, "train_step");
  if (mlir::failed(proto))
    return {};
  return neuron::evaluateHlo(*proto, args);
}

void expectNear(const neuron::HloArray &hlo, const Tensor &cpu, double tolerance,
                const char *what) {
  EXPECT_EQ(hlo.dims, cpu.shape()) << what;
  std::vector<double> expected = toDoubles(cpu);
  ASSERT_EQ(hlo.values.size(), expected.size()) << what;
  for (size_t i = 0; i < expected.size(); ++i)
    EXPECT_NEAR(hlo.values[i], expected[i], tolerance * std::max(1.0, std::fabs(expected[i])))
        << what << " [" << i << "]";
}

} // namespace

TEST(MoeHloTest, LoweringComputesTheCpuKernels) {
  std::mt19937 rng(7);
  Tensor logits = randomTensor({2, 5, 4}, rng, 2.0f);
  float *l = logits.mutableData<float>();
  // Token 0: every logit equal (ids 0 then 1); token 1: experts 1 and 2 tie
  // for the top (1 first).
  std::fill(l, l + 4, 0.5f);
  l[4] = 0.0f, l[5] = 3.0f, l[6] = 3.0f, l[7] = -1.0f;
  Tensor bias(DType::F32, {4});
  // Expert 3 is never selected: its weight gradients must be zero.
  bias.mutableData<float>()[3] = -10.0f;
  Tensor x = randomTensor({2, 5, 8}, rng), w1 = randomTensor({4, 6, 8}, rng, 0.3f),
         w3 = randomTensor({4, 6, 8}, rng, 0.3f), w2 = randomTensor({4, 8, 6}, rng, 0.3f),
         dy = randomTensor({2, 5, 8}, rng), dprobs = randomTensor({2, 5, 4}, rng);
  Tensor dloss(DType::F32, {});
  *dloss.mutableData<float>() = 0.75f;

  std::vector<std::vector<neuron::HloArray>> out = lowerAndEvaluate(
      kMoeStep, {{arrayOf(logits), arrayOf(bias), arrayOf(x), arrayOf(w1), arrayOf(w3),
                  arrayOf(w2), arrayOf(dy), arrayOf(dprobs), arrayOf(dloss)}});
  ASSERT_EQ(out.size(), 1u);
  const std::vector<neuron::HloArray> &r = out[0];
  ASSERT_EQ(r.size(), 14u);

  kernels::RouterOutputs routed = kernels::router(logits, 2, true, &bias);
  EXPECT_EQ(r[1].values, toDoubles(routed.experts));
  EXPECT_EQ((std::vector<double>(r[1].values.begin(), r[1].values.begin() + 4)),
            (std::vector<double>{0, 1, 1, 2}));
  for (double id : r[1].values)
    EXPECT_NE(id, 3.0);
  expectNear(r[0], routed.weights, 1e-6, "router weights");
  expectNear(r[2], routed.probs, 1e-6, "router probs");
  expectNear(r[3],
             kernels::groupedExperts(x, routed.weights, routed.experts, w1, w3, w2), 1e-5,
             "grouped experts");
  kernels::GroupedExpertsGrads g = kernels::groupedExpertsBackward(
      dy, x, routed.weights, routed.experts, w1, w3, w2);
  expectNear(r[4], g.x, 1e-5, "d x");
  expectNear(r[5], g.weights, 1e-5, "d weights");
  expectNear(r[6], g.w1, 1e-5, "d w1");
  expectNear(r[7], g.w3, 1e-5, "d w3");
  expectNear(r[8], g.w2, 1e-5, "d w2");
  for (int64_t i = 3 * 48; i < 4 * 48; ++i) // expert 3's block of d w1
    EXPECT_EQ(r[6].values[i], 0.0);
  expectNear(r[9],
             kernels::routerBackward(routed.probs, routed.experts, g.weights, &dprobs, true),
             1e-5, "d logits");
  Tensor aux = kernels::loadBalancingLoss({routed.probs}, {routed.experts});
  expectNear(r[10], aux, 1e-6, "aux loss");
  expectNear(r[11], kernels::loadBalancingLossBackward(dloss, {routed.experts}, 4)[0], 1e-6,
             "d probs of the aux loss");
  expectNear(r[12], kernels::expertBiasUpdate(bias, {routed.experts}, 1e-3), 1e-7,
             "expert bias");
  EXPECT_NEAR(r[13].values[0], 0.01 * *aux.data<float>(), 1e-8);
}

// The token dispatcher (LowerToHloExpertDispatch.cpp) against
// lib/Runtime/ExpertDispatchKernels.cpp: 2 chunks of 80 tokens, top-2 of 4
// experts in 2 blocks, so each chunk's 160 pairs take the two-level prefix
// sum (blocks of 128). Dropless (capacity 160) and at capacity 50, where
// about a third of the pairs are dropped: the same slots, rows, weights and
// ids exactly, the sums within float32 rounding.
TEST(MoeHloTest, DispatchLoweringPlacesAndDropsAsTheCpuKernels) {
  const int64_t batch = 4, seq = 40, hidden = 4, k = 2, experts = 4, groups = 2, chunks = 2;
  std::mt19937 rng(11);
  Tensor x = randomTensor({batch, seq, hidden}, rng), w = randomTensor({batch, seq, k}, rng);
  Tensor ids(DType::I64, {batch, seq, k});
  std::uniform_int_distribution<int64_t> pick(0, experts - 1);
  int64_t *id = ids.mutableData<int64_t>();
  for (int64_t t = 0; t < batch * seq; ++t) {
    id[t * k] = pick(rng);
    do
      id[t * k + 1] = pick(rng);
    while (id[t * k + 1] == id[t * k]);
  }
  for (int64_t capacity : {160, 50}) {
    SCOPED_TRACE("capacity " + std::to_string(capacity));
    int64_t rows = chunks * capacity;
    std::string text = fmt::format(R"(
func.func @train_step(%x: tensor<4x40x4xf32>, %w: tensor<4x40x2xf32>, %ids: tensor<4x40x2xi64>,
                      %drows: tensor<2x{0}x4xf32>, %drw: tensor<2x{0}x1xf32>, %dy: tensor<4x40x4xf32>)
    -> (tensor<2x{0}x4xf32>, tensor<2x{0}x1xf32>, tensor<2x{0}x1xi64>, tensor<4x40x2xi64>,
        tensor<4x40x4xf32>, tensor<4x40x4xf32>, tensor<4x40x2xf32>, tensor<2x{0}x4xf32>) {{
  %rows, %rw, %re, %slots = kiln.expert_dispatch %x, %w, %ids
      {{groups = 2 : i64, chunks = 2 : i64, capacity = {1} : i64, num_experts = 4 : i64, fqn = "moe.experts"}}
      : (tensor<4x40x4xf32>, tensor<4x40x2xf32>, tensor<4x40x2xi64>)
      -> (tensor<2x{0}x4xf32>, tensor<2x{0}x1xf32>, tensor<2x{0}x1xi64>, tensor<4x40x2xi64>)
  %y = kiln.expert_combine %slots, %drows {{chunks = 2 : i64, fqn = "moe.experts"}}
      : (tensor<4x40x2xi64>, tensor<2x{0}x4xf32>) -> tensor<4x40x4xf32>
  %dx, %dw = kiln.expert_dispatch_backward %slots, %drows, %drw {{chunks = 2 : i64, fqn = "moe.experts"}}
      : (tensor<4x40x2xi64>, tensor<2x{0}x4xf32>, tensor<2x{0}x1xf32>) -> (tensor<4x40x4xf32>, tensor<4x40x2xf32>)
  %dr = kiln.expert_combine_backward %dy, %slots
      {{groups = 2 : i64, chunks = 2 : i64, capacity = {1} : i64, fqn = "moe.experts"}}
      : (tensor<4x40x4xf32>, tensor<4x40x2xi64>) -> tensor<2x{0}x4xf32>
  return %rows, %rw, %re, %slots, %y, %dx, %dw, %dr
      : tensor<2x{0}x4xf32>, tensor<2x{0}x1xf32>, tensor<2x{0}x1xi64>, tensor<4x40x2xi64>,
        tensor<4x40x4xf32>, tensor<4x40x4xf32>, tensor<4x40x2xf32>, tensor<2x{0}x4xf32>
}}
)",
                                   rows, capacity);
    Tensor drows = randomTensor({groups, rows, hidden}, rng), drw = randomTensor({groups, rows, 1}, rng),
           dy = randomTensor({batch, seq, hidden}, rng);
    auto out = lowerAndEvaluate(text, {{arrayOf(x), arrayOf(w), arrayOf(ids), arrayOf(drows),
                                        arrayOf(drw), arrayOf(dy)}});
    ASSERT_EQ(out.size(), 1u);
    const std::vector<neuron::HloArray> &r = out[0];
    ASSERT_EQ(r.size(), 8u);
    kernels::DispatchLayout layout{groups, chunks, capacity};
    kernels::DispatchOutputs d = kernels::expertDispatch(x, w, ids, layout, experts);
    EXPECT_EQ(r[3].values, toDoubles(d.slots));
    EXPECT_EQ(r[2].values, toDoubles(d.rowExperts));
    EXPECT_EQ(r[1].values, toDoubles(d.rowWeights));
    EXPECT_EQ(r[0].values, toDoubles(d.rows));
    int64_t dropped = std::count(d.slots.data<int64_t>(), d.slots.data<int64_t>() + d.slots.numel(), -1);
    if (capacity == 50)
      EXPECT_GT(dropped, 40);
    else
      EXPECT_EQ(dropped, 0);
    expectNear(r[4], kernels::expertCombine(d.slots, drows, chunks), 1e-6, "combine");
    auto [dx, dw] = kernels::expertDispatchBackward(d.slots, drows, drw, chunks);
    expectNear(r[5], dx, 1e-6, "dispatch backward: d x");
    EXPECT_EQ(r[6].values, toDoubles(dw));
    EXPECT_EQ(r[7].values, toDoubles(kernels::expertCombineBackward(dy, d.slots, layout)));
  }
}
