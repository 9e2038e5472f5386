//===- ActivationCheckpointTest.cpp - Training with recomputed layers -----===//
//
// Activation checkpointing changes what the backward keeps, never what it
// computes: every mode trains the dense fixture bit for bit as without it
// (the recomputed ops run the same deterministic kernels on the same inputs),
// the memory plan still equals the executor's measured peak, and the saved
// activations shrink in the order full < selective op < selective 2 < none.
//
//===----------------------------------------------------------------------===//

#include "TestUtil.h"
#include "kiln/Dialect/Kiln/IR/Recomputed.h"
#include "kiln/Driver/LayoutSearch.h"
#include "kiln/Driver/Training.h"
#include "kiln/Planner/MemoryPlan.h"
#include "kiln/Runtime/TokenBatch.h"
#include "kiln/Config/SelectiveAcOption.h"

#include "mlir/IR/BuiltinOps.h"

using namespace kiln;
using namespace kiln::test;

namespace {

const std::string kFixture = dataPath("qwen3-dense-tiny");

TrainConfig checkpointConfig(const std::string &mode, const std::string &option) {
  return TrainConfig::load(
      "", {"--model.hf_path=" + kFixture, "--checkpoint.initial_load_path=" + kFixture,
           "--checkpoint.initial_load_in_hf=true", "--data.tokens_file=" + kFixture + "/tokens.json",
           "--training.steps=5", "--lr_scheduler.warmup_steps=0", "--lr_scheduler.decay_ratio=0",
           "--target.name=cpu", "--activation_checkpoint.mode=" + mode,
           "--activation_checkpoint.selective_ac_option=" + option});
}

struct CheckpointedRun {
  std::vector<StepMetrics> steps;
  MemoryPlan plan;
  TensorMap parameters;
  int64_t recomputedOps = 0;
};

CheckpointedRun train(const std::string &mode, const std::string &option) {
  Trainer trainer(checkpointConfig(mode, option));
  CheckpointedRun run;
  auto step = trainer.module().lookupSymbol<mlir::func::FuncOp>("train_step");
  run.plan = planMemory(step);
  step.walk([&](mlir::Operation *op) { run.recomputedOps += isRecomputed(op); });
  Tensor tokens = readTokenBatch(kFixture + "/tokens.json");
  for (int k = 0; k < 5; ++k)
    run.steps.push_back(trainer.step(tokens));
  run.parameters = trainer.parameters();
  return run;
}

TEST(ActivationCheckpointTest, EveryModeTrainsBitForBitWithAnExactSmallerPlan) {
  CheckpointedRun none = train("none", "2");
  CheckpointedRun full = train("full", "2");
  CheckpointedRun op = train("selective", "op");
  CheckpointedRun every2 = train("selective", "2");
  EXPECT_EQ(none.recomputedOps, 0);
  for (const auto &[name, run] : {std::pair<const char *, CheckpointedRun *>{"none", &none},
                                  {"full", &full}, {"selective op", &op},
                                  {"selective 2", &every2}}) {
    SCOPED_TRACE(name);
    if (run != &none) {
      EXPECT_GT(run->recomputedOps, 0);
    }
    for (size_t k = 0; k < run->steps.size(); ++k) {
      // Identical, not close: the same kernels on the same operands.
      EXPECT_EQ(run->steps[k].loss, none.steps[k].loss) << "step " << k;
      EXPECT_EQ(run->steps[k].gradNorm, none.steps[k].gradNorm) << "step " << k;
      EXPECT_EQ(run->steps[k].memLivePeakBytes, run->plan.peakBytes) << "step " << k;
    }
    for (const auto &[key, tensor] : none.parameters)
      EXPECT_EQ(maxAbsDiff(toDoubles(run->parameters.at(key)), toDoubles(tensor)), 0.0) << key;
  }
  // Full keeps each layer's input; op-level also the matmuls' results; every
  // 2nd layer (layer 1 of 3) drops one layer's worth.
  EXPECT_LT(full.plan.savedActivationBytes, op.plan.savedActivationBytes);
  EXPECT_LT(op.plan.savedActivationBytes, none.plan.savedActivationBytes);
  EXPECT_LT(full.plan.savedActivationBytes, every2.plan.savedActivationBytes);
  EXPECT_LT(every2.plan.savedActivationBytes, none.plan.savedActivationBytes);
  EXPECT_LT(full.plan.peakBytes, none.plan.peakBytes);
}

TEST(ActivationCheckpoint, OneParserDecidesEverySelectiveOption) {
  struct Case {
    std::string text;
    std::optional<int64_t> every; ///< nullopt: rejected
  };
  // Long values the config and --search-ac once bounded differently.
  for (const Case &c : std::vector<Case>{{"2", 2},
                                         {"007", 7},
                                         {"1234567890", 1234567890},
                                         {"9223372036854775807", INT64_MAX},
                                         {"9223372036854775808", std::nullopt},
                                         {"0", std::nullopt},
                                         {"-1", std::nullopt},
                                         {"+1", std::nullopt},
                                         {"2.5", std::nullopt},
                                         {"", std::nullopt}}) {
    SCOPED_TRACE(c.text);
    std::optional<SelectiveAcOption> parsed = parseSelectiveAcOption(c.text);
    ASSERT_EQ(parsed.has_value(), c.every.has_value());
    if (parsed) {
      EXPECT_FALSE(parsed->opLevel);
      EXPECT_EQ(parsed->every, *c.every);
    }
    auto accepted = [](auto fn) {
      try {
        fn();
        return true;
      } catch (const Error &) {
        return false;
      }
    };
    EXPECT_EQ(accepted([&] { checkpointConfig("selective", c.text); }), c.every.has_value());
    EXPECT_EQ(accepted([&] { parseSearchCheckpointing("selective:" + c.text); }),
              c.every.has_value());
  }
  ASSERT_TRUE(parseSelectiveAcOption("op"));
  EXPECT_TRUE(parseSelectiveAcOption("op")->opLevel);
  // --search-ac spells op-level checkpointing "selective".
  EXPECT_ANY_THROW(parseSearchCheckpointing("selective:op"));
}

} // namespace
