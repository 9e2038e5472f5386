// Pipeline stages differentiated one by one compose to the whole model's
// gradient: on the dense and MoE fixtures, the captured loss split in two
// (kiln-pipeline-split) and each stage differentiated from its output's
// cotangent (kiln-autodiff pipeline-stages), stage 0's forward, stage 1's
// loss and backward, then stage 0's backward from the cotangent stage 1
// returns give the loss and every parameter's gradient of @loss_grad (the
// tied table's as the sum of its two stages'), run by the CPU executor.
#include "TestUtil.h"
#include "kiln/Backend/CPU/Executor.h"
#include "kiln/Dialect/Kiln/IR/KilnDialect.h"
#include "kiln/Driver/TrainConfig.h"
#include "kiln/Driver/Training.h"
#include "kiln/Passes/Kiln/Passes.h"
#include "kiln/Runtime/SafeTensors.h"
#include "kiln/Runtime/TokenBatch.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassManager.h"

using namespace kiln;
using namespace kiln::test;

namespace {

/// The arguments of `fn`: parameters from `checkpoint`, data inputs by name,
/// transfers and cotangents by their number.
std::vector<Tensor> argumentsOf(mlir::func::FuncOp fn, const Checkpoint &checkpoint,
                                const InputsAndLabels &data,
                                const std::map<int64_t, Tensor> &transfers,
                                const std::map<int64_t, Tensor> &cotangents = {}) {
  std::vector<Tensor> args;
  for (unsigned i = 0; i < fn.getNumArguments(); ++i) {
    mlir::Type type = fn.getArgumentTypes()[i];
    if (auto key = fn.getArgAttrOfType<mlir::StringAttr>(i, kParamAttr))
      args.push_back(bindParameter(checkpoint, key.str(), type, "test"));
    else if (auto name = fn.getArgAttrOfType<mlir::StringAttr>(i, kInputAttr))
      args.push_back(name.getValue() == "labels" ? data.labels : data.inputIds);
    else if (auto n = fn.getArgAttrOfType<mlir::IntegerAttr>(i, kTransferAttr))
      args.push_back(transfers.at(n.getInt()));
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

void expectStagesComposeToWholeGradient(const std::string &fixture) {
  const std::string dir = dataPath(fixture);
  Qwen3Config model = TrainConfig::load("", {"--model.hf_path=" + dir}).model.resolve();
  InputsAndLabels data = splitInputsAndLabels(readTokenBatch(dir + "/tokens.json"));
  int64_t batch = data.inputIds.shape()[0], seq = data.inputIds.shape()[1];
  mlir::MLIRContext context;
  auto module = captureTrainingStep(context, model, {batch, seq}, KilnPipelineOptions(),
                                    PipelineStage::Forward);
  mlir::PassManager pm(&context);
  PipelineSplitOptions split;
  split.stageStarts = {"layers.1"};
  pm.addPass(createPipelineSplit(split));
  pm.addPass(createAutodiff());
  AutodiffOptions stages;
  stages.pipelineStages = true;
  pm.addPass(createAutodiff(stages));
  ASSERT_TRUE(mlir::succeeded(pm.run(*module)));
  auto fn = [&](const char *name) { return module->lookupSymbol<mlir::func::FuncOp>(name); };
  Checkpoint checkpoint = Checkpoint::open(dir);

  mlir::func::FuncOp whole = fn("loss_grad"), forward0 = fn("loss_stage0"),
                     grad1 = fn("loss_stage1_grad"), grad0 = fn("loss_stage0_grad");
  std::vector<Tensor> wholeResults = runFunction(whole, argumentsOf(whole, checkpoint, data, {}));
  // Stage 0's forward sends its transfers; stage 1 takes them, returns the
  // loss, its gradients and their cotangents; stage 0's backward takes those.
  std::vector<Tensor> sent = runFunction(forward0, argumentsOf(forward0, checkpoint, data, {}));
  std::map<int64_t, Tensor> transfers = resultsBy<int64_t>(forward0, sent, kTransferAttr);
  ASSERT_EQ(transfers.size(), 1u) << "the residual stream alone crosses";
  std::vector<Tensor> last = runFunction(grad1, argumentsOf(grad1, checkpoint, data, transfers));
  std::map<int64_t, Tensor> cotangents = resultsBy<int64_t>(grad1, last, kCotangentAttr);
  ASSERT_EQ(cotangents.size(), 1u);
  std::vector<Tensor> first =
      runFunction(grad0, argumentsOf(grad0, checkpoint, data, {}, cotangents));

  EXPECT_EQ(toDoubles(last[0]), toDoubles(wholeResults[0])) << "the loss";
  std::map<std::string, std::vector<double>> summed;
  for (auto [g, results] : {std::pair{grad0, &first}, std::pair{grad1, &last}})
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
    // are summed in another order (float32 rounding).
    std::vector<double> want = toDoubles(tensor);
    double scale = 0;
    for (double x : want)
      scale = std::max(scale, std::abs(x));
    EXPECT_LE(maxAbsDiff(summed.at(key), want), 1e-6 * std::max(1.0, scale)) << key;
  }
}

} // namespace

TEST(PipelineStageGradTest, DenseStagesComposeToTheWholeGradient) {
  expectStagesComposeToWholeGradient("qwen3-dense-tiny");
}

TEST(PipelineStageGradTest, MoeStagesComposeToTheWholeGradient) {
  expectStagesComposeToWholeGradient("qwen3-moe-tiny");
}
