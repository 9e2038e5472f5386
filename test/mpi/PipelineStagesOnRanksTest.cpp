// The fixtures' stage functions run on pipeline ranks as the schedule says
// give one rank's loss and gradients: each fixture's loss split in two
// stages (kiln-pipeline-split, kiln-autodiff pipeline-stages; four under
// Interleaved1F1B), run by 1F1B (and GPipe, Interleaved1F1B) over 2 pipeline ranks (x 2
// data-parallel ranks doing the same) on its 2-row batch in microbatches of 1 row, the activations
// and cotangents moved over MPI; the gradients summed over the pipeline ranks and the 2
// microbatches, halved, against @loss_grad of the whole batch on one
// process, within 1e-5 of each tensor's largest element; the loss, the mean
// of the microbatches' means, against the whole batch's mean (each row has
// as many labelled positions).
#include "kiln/Backend/CPU/Executor.h"
#include "kiln/Backend/CPU/PipelineRunner.h"
#include "kiln/Dialect/Kiln/IR/KilnDialect.h"
#include "kiln/Driver/ParallelLayout.h"
#include "kiln/Driver/PipelineStageExecutor.h"
#include "kiln/Driver/PipelineStageFunctions.h"
#include "kiln/Driver/Training.h"
#include "kiln/Passes/Kiln/Passes.h"

#include "mlir/Pass/PassManager.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace kiln;

namespace {

/// @loss_grad of the whole batch: loss, then gradients by HF key.
std::pair<float, TensorMap> wholeBatchGradients(const Qwen3Config &model,
                                                const Checkpoint &checkpoint,
                                                const InputsAndLabels &batch) {
  mlir::MLIRContext context;
  auto module =
      captureTrainingStep(context, model, {batch.inputIds.shape()[0], batch.inputIds.shape()[1]},
                          KilnPipelineOptions(), LoweringStage::Forward);
  mlir::PassManager pm(&context);
  pm.addPass(createAutodiff());
  EXPECT_TRUE(mlir::succeeded(pm.run(*module)));
  auto fn = module->lookupSymbol<mlir::func::FuncOp>("loss_grad");
  std::vector<Tensor> results = runFunction(
      fn, bindArguments(fn, checkpoint, {{"input_ids", batch.inputIds}, {"labels", batch.labels}}));
  TensorMap grads;
  for (unsigned i = 0; i < fn.getNumResults(); ++i)
    if (auto key = fn.getResultAttrOfType<mlir::StringAttr>(i, kGradAttr))
      grads.emplace(key.str(), results[i]);
  return {results[0].data<float>()[0], grads};
}

void expectPipelineEqualsOneRank(const std::string &fixture, const std::string &schedule = "1F1B") {
  SCOPED_TRACE(fixture + " " + schedule);
  const std::string dir = std::string(KILN_TEST_DATA_DIR) + "/" + fixture;
  TrainConfig config =
      TrainConfig::load("", {"--model.hf_path=" + dir, "--parallelism.pipeline_parallel_degree=2",
                             "--parallelism.pipeline_parallel_schedule=" + schedule});
  Qwen3Config model = config.model.resolve();
  Tensor tokens = readTokenBatch(dir + "/tokens.json");
  int64_t rows = tokens.shape()[0], seq = tokens.shape()[1] - 1;
  DeviceGrid grid({"pp", "dp"}, {2, 2});
  ParallelLayout layout = ParallelLayout::resolve(config.parallelism, model, seq, 4);
  PipelineSchedule order = layout.pipelineSchedule(rows);
  ASSERT_EQ(order.microbatches, 2);

  mlir::MLIRContext context;
  auto module = captureStageFunctions(context, model, layout, seq, KilnPipelineOptions());
  Checkpoint checkpoint = Checkpoint::open(dir);
  TensorMap parameters;
  for (auto fn : module->getOps<mlir::func::FuncOp>())
    for (unsigned i = 0; i < fn.getNumArguments(); ++i)
      if (auto key = fn.getArgAttrOfType<mlir::StringAttr>(i, kParamAttr))
        parameters.emplace(key.str(),
                           bindParameter(checkpoint, key.str(), fn.getArgumentTypes()[i], "test"));
  PipelineStageExecutor executor(*module, layout.stages.numStages(), parameters,
                                 splitMicrobatches(tokens, order.microbatches));
  int64_t pipelineRank = grid.coordinates()[0];
  runPipelineSchedule(order, pipelineRank, executor.calls(), grid, 0);

  auto [wholeLoss, wholeGrads] =
      wholeBatchGradients(model, checkpoint, splitInputsAndLabels(tokens));
  if (pipelineRank == order.rankOf(order.numStages() - 1)) {
    ASSERT_EQ(executor.losses().size(), 2u);
    float mean = (executor.losses().at(0) + executor.losses().at(1)) / 2;
    EXPECT_NEAR(mean, wholeLoss, 1e-5);
  }
  for (const auto &[key, want] : wholeGrads) {
    auto mine = executor.gradients().find(key);
    Tensor local =
        mine != executor.gradients().end() ? mine->second : Tensor(DType::F32, want.shape());
    Tensor summed = grid.allReduce(local, {0}, Reduction::Sum);
    double scale = 0, worst = 0;
    for (int64_t i = 0; i < want.numel(); ++i) {
      scale = std::max(scale, std::abs(double(want.data<float>()[i])));
      worst = std::max(
          worst, std::abs(double(summed.data<float>()[i]) / 2 - double(want.data<float>()[i])));
    }
    EXPECT_LE(worst, 1e-5 * std::max(1.0, scale)) << key;
  }
}

} // namespace

TEST(PipelineStagesOnRanks, DenseFixtureOverTwoPipelineRanksEqualsOneRank) {
  expectPipelineEqualsOneRank("qwen3-dense-tiny");
}

TEST(PipelineStagesOnRanks, MoeFixtureOverTwoPipelineRanksEqualsOneRank) {
  expectPipelineEqualsOneRank("qwen3-moe-tiny");
}

// GPipe, and Interleaved1F1B with two stages per rank (four: tok_embeddings
// and layers.0, layers.1, layers.2, norm and output).
TEST(PipelineStagesOnRanks, OtherSchedulesEqualOneRank) {
  expectPipelineEqualsOneRank("qwen3-dense-tiny", "GPipe");
  expectPipelineEqualsOneRank("qwen3-dense-tiny", "Interleaved1F1B");
}
