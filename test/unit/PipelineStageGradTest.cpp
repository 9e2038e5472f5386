// Pipeline stages differentiated one by one compose to the whole model's
// gradient: on the dense and MoE fixtures, the captured loss split in two
// (kiln-pipeline-split) and each stage differentiated from its output's
// cotangent into a forward and a backward function (kiln-autodiff
// pipeline-stages), run as a pipeline runs a microbatch: stage 0's forward,
// stage 1's forward and backward, stage 0's backward from the cotangent
// stage 1 returns, each backward on the residuals of its forward. They give
// the loss and every parameter's gradient of @loss_grad (the tied table's as
// the sum of its two stages'), run by the CPU executor; in float32 and with
// bf16 parameters (the mixed-precision casts of buildPipelineStagesPipeline).
#include "TestUtil.h"
#include "kiln/Backend/CPU/Executor.h"
#include "kiln/Dialect/Kiln/IR/KilnDialect.h"
#include "kiln/Driver/TrainConfig.h"
#include "kiln/Driver/Training.h"
#include "kiln/Passes/Kiln/Passes.h"
#include "kiln/Pipeline/KilnPipeline.h"
#include "kiln/Runtime/SafeTensors.h"
#include "kiln/Runtime/TokenBatch.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassManager.h"

#include <cmath>

using namespace kiln;
using namespace kiln::test;

namespace {

/// The arguments of `fn`: parameters from `checkpoint`, data inputs by name,
/// transfers, cotangents and residuals by their number.
std::vector<Tensor> argumentsOf(mlir::func::FuncOp fn, const Checkpoint &checkpoint,
                                const InputsAndLabels &data,
                                const std::map<int64_t, Tensor> &transfers,
                                const std::map<int64_t, Tensor> &cotangents = {},
                                const std::map<int64_t, Tensor> &residuals = {}) {
  std::vector<Tensor> args;
  for (unsigned i = 0; i < fn.getNumArguments(); ++i) {
    mlir::Type type = fn.getArgumentTypes()[i];
    if (auto key = fn.getArgAttrOfType<mlir::StringAttr>(i, kParamAttr))
      args.push_back(bindParameter(checkpoint, key.str(), type, "test"));
    else if (auto name = fn.getArgAttrOfType<mlir::StringAttr>(i, kInputAttr))
      args.push_back(name.getValue() == "labels" ? data.labels : data.inputIds);
    else if (auto n = fn.getArgAttrOfType<mlir::IntegerAttr>(i, kTransferAttr))
      args.push_back(transfers.at(n.getInt()));
    else if (auto r = fn.getArgAttrOfType<mlir::IntegerAttr>(i, kResidualAttr))
      args.push_back(residuals.at(r.getInt()));
    else
      args.push_back(
          cotangents.at(fn.getArgAttrOfType<mlir::IntegerAttr>(i, kCotangentAttr).getInt()));
  }
  return args;
}

/// Results of `fn` tagged `attr`, by the attribute's value.
template <typename Key>
std::map<Key, Tensor> resultsBy(mlir::func::FuncOp fn, const std::vector<Tensor> &results,
                                llvm::StringRef attr) {
  std::map<Key, Tensor> byKey;
  for (unsigned i = 0; i < fn.getNumResults(); ++i) {
    mlir::Attribute a = fn.getResultAttr(i, attr);
    if constexpr (std::is_same_v<Key, std::string>) {
      if (auto s = llvm::dyn_cast_if_present<mlir::StringAttr>(a))
        byKey.emplace(s.str(), results[i]);
    } else if (auto n = llvm::dyn_cast_if_present<mlir::IntegerAttr>(a)) {
      byKey.emplace(n.getInt(), results[i]);
    }
  }
  return byKey;
}

void expectStagesComposeToWholeGradient(const std::string &fixture,
                                        PrecisionDtype param = PrecisionDtype::Float32) {
  const std::string dir = dataPath(fixture);
  Qwen3Config model = TrainConfig::load("", {"--model.hf_path=" + dir}).model.resolve();
  InputsAndLabels data = splitInputsAndLabels(readTokenBatch(dir + "/tokens.json"));
  int64_t batch = data.inputIds.shape()[0], seq = data.inputIds.shape()[1];
  mlir::MLIRContext context;
  auto module = captureTrainingStep(context, model, {batch, seq}, KilnPipelineOptions(),
                                    LoweringStage::Forward);
  mlir::PassManager pm(&context);
  KilnPipelineOptions options;
  options.paramDtype = param;
  // The stages as the driver builds them; the casts land in @loss itself, so
  // @loss_grad, the reference, rounds as the stages do.
  buildPipelineStagesPipeline(pm, options, {"layers.1"});
  pm.addPass(createAutodiff());
  ASSERT_TRUE(mlir::succeeded(pm.run(*module)));
  int64_t casts = 0;
  module->walk([&](mlir::Operation *op) { casts += op->getName().getStringRef() == "kiln.cast"; });
  EXPECT_EQ(casts > 0, param == PrecisionDtype::BFloat16);
  auto fn = [&](const char *name) { return module->lookupSymbol<mlir::func::FuncOp>(name); };
  Checkpoint checkpoint = Checkpoint::open(dir);

  mlir::func::FuncOp whole = fn("loss_grad"), forward0 = fn("loss_stage0_forward"),
                     forward1 = fn("loss_stage1_forward"), backward1 = fn("loss_stage1_backward"),
                     backward0 = fn("loss_stage0_backward");
  ASSERT_TRUE(whole && forward0 && forward1 && backward1 && backward0);
  std::vector<Tensor> wholeResults = runFunction(whole, argumentsOf(whole, checkpoint, data, {}));
  // Stage 0's forward sends its transfers and keeps its residuals; stage 1
  // runs forward and backward; stage 0's backward takes the cotangents.
  std::vector<Tensor> sent = runFunction(forward0, argumentsOf(forward0, checkpoint, data, {}));
  std::map<int64_t, Tensor> transfers = resultsBy<int64_t>(forward0, sent, kTransferAttr);
  ASSERT_EQ(transfers.size(), 1u) << "the residual stream alone crosses";
  std::vector<Tensor> out1 =
      runFunction(forward1, argumentsOf(forward1, checkpoint, data, transfers));
  std::vector<Tensor> last =
      runFunction(backward1, argumentsOf(backward1, checkpoint, data, transfers, {},
                                         resultsBy<int64_t>(forward1, out1, kResidualAttr)));
  std::map<int64_t, Tensor> cotangents = resultsBy<int64_t>(backward1, last, kCotangentAttr);
  ASSERT_EQ(cotangents.size(), 1u);
  std::vector<Tensor> first =
      runFunction(backward0, argumentsOf(backward0, checkpoint, data, {}, cotangents,
                                         resultsBy<int64_t>(forward0, sent, kResidualAttr)));

  EXPECT_EQ(toDoubles(out1[0]), toDoubles(wholeResults[0])) << "the loss";
  std::map<std::string, std::vector<double>> summed;
  for (auto [g, results] : {std::pair{backward0, &first}, std::pair{backward1, &last}})
    for (auto &[key, tensor] : resultsBy<std::string>(g, *results, kGradAttr)) {
      std::vector<double> values = toDoubles(tensor);
      auto [it, added] = summed.emplace(key, values);
      if (!added)
        for (size_t i = 0; i < values.size(); ++i)
          it->second[i] += values[i];
    }
  std::map<std::string, Tensor> expected = resultsBy<std::string>(whole, wholeResults, kGradAttr);
  ASSERT_EQ(summed.size(), expected.size());
  for (auto &[key, tensor] : expected) {
    // The same kernels in the same order; only the tied table's two parts
    // are summed in another order (float32 rounding). In bf16 each stage
    // also rounds its part of the table's gradient to bf16 before the sum,
    // where @loss_grad rounds the sum once: one bf16 rounding (2^-8) of the
    // tensor's largest element (measured 3.4e-3 of it).
    std::vector<double> want = toDoubles(tensor);
    double scale = 0;
    for (double x : want)
      scale = std::max(scale, std::abs(x));
    bool tiedInBf16 = param == PrecisionDtype::BFloat16 && key == "model.embed_tokens.weight";
    double tolerance = tiedInBf16 ? std::ldexp(scale, -8) : 1e-6 * std::max(1.0, scale);
    EXPECT_LE(maxAbsDiff(summed.at(key), want), tolerance)
        << key << " (largest element " << scale << ")";
  }
}

} // namespace

TEST(PipelineStageGradTest, DenseStagesComposeToTheWholeGradient) {
  expectStagesComposeToWholeGradient("qwen3-dense-tiny");
}

TEST(PipelineStageGradTest, MoeStagesComposeToTheWholeGradient) {
  expectStagesComposeToWholeGradient("qwen3-moe-tiny");
}

TEST(PipelineStageGradTest, Bf16StagesComposeToTheWholeGradient) {
  expectStagesComposeToWholeGradient("qwen3-dense-tiny", PrecisionDtype::BFloat16);
}
