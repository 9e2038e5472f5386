// Training under pipeline parallelism on 2 MPI ranks equals Hugging Face
// Transformers' float32 run of the dense fixture (expected.json: AdamW, lr
// 8e-4, clipping at 1.0, the same 2-row batch every step): 2 stages
// (tok_embeddings and layers.0-1; layers.2, norm and output) over 2 pipeline
// ranks in microbatches of 1 row, under 1F1B and GPipe, and 4 stages under
// Interleaved1F1B and (on 4 ranks) GPipe over 4 pipeline ranks; the MoE
// fixture under 1F1B. The tied table is used by both ranks: its gradient is
// summed between them and both update it alike. Every step's loss and
// gradient norm (over both ranks' stages) within 1e-5 of the fixture's; each
// rank's weights after 5 steps within 1e-5 of weights_after_5_steps, and
// both ranks together hold every tensor of it; the evaluated loss (the
// schedule's forwards alone) before and after, Transformers' within 1e-5.
#include "kiln/Driver/PipelineTraining.h"
#include "kiln/Backend/CPU/Executor.h"
#include "kiln/Dialect/Kiln/IR/Signature.h"
#include "kiln/Driver/ParallelLayout.h"
#include "kiln/Driver/PipelineConfig.h"
#include "kiln/Driver/TrainConfig.h"
#include "kiln/Driver/Training.h"
#include "kiln/Pipeline/KilnPipeline.h"
#include "kiln/Runtime/HfCheckpoint.h"
#include "kiln/Runtime/TokenBatch.h"
#include "kiln/Support/Error.h"
#include "kiln/Support/Json.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fmt/format.h>
#include <fstream>
#include <unistd.h>

using namespace kiln;

namespace {

const std::string kFixture = std::string(KILN_TEST_DATA_DIR) + "/qwen3-dense-tiny";

/// A step of Transformers' run of a fixture: the loss before its update and
/// the gradient norm before clipping.
struct FixtureStep {
  double loss, gradNorm;
};

/// The six steps of `fixture`'s expected.json, in either of its layouts
/// (the dense fixture's "steps", the MoE fixture's "step" records).
std::vector<FixtureStep> fixtureSteps(const std::string &fixture) {
  nlohmann::json expected = parseJson(readFile(fixture + "/expected.json"), "expected.json");
  std::vector<FixtureStep> steps;
  if (expected.is_object())
    for (const nlohmann::json &step : expected["steps"])
      steps.push_back({step["loss_before_update"].get<double>(),
                       step["grad_norm_before_clipping"].get<double>()});
  else
    for (const nlohmann::json &record : expected)
      if (record["event"] == "step")
        steps.push_back({record["loss"].get<double>(), record["grad_norm"].get<double>()});
  EXPECT_EQ(steps.size(), 6u) << fixture;
  return steps;
}

void expectFixtureRun(const std::string &schedule, const std::string &fixture = kFixture,
                      int64_t pp = 2) {
  SCOPED_TRACE(schedule + " " + fixture);
  TrainConfig config = TrainConfig::load(
      "", {"--model.hf_path=" + fixture, "--training.local_batch_size=2", "--training.seq_len=32",
           "--training.max_norm=1.0", "--optimizer.lr=0.0008", "--optimizer.betas=[0.9,0.95]",
           "--optimizer.eps=1e-8", "--optimizer.weight_decay=0.1", "--lr_scheduler.warmup_steps=0",
           "--lr_scheduler.decay_ratio=0",
           "--parallelism.pipeline_parallel_degree=" + std::to_string(pp),
           "--parallelism.pipeline_parallel_schedule=" + schedule});
  Qwen3Config model = config.model.resolve();
  ParallelLayout layout = ParallelLayout::resolve(config.parallelism, model, 32, pp);
  auto options = pipelineOptions(config, model, nullptr, PrecisionDtype::Float32, TargetName::Cpu);
  DeviceGrid grid(layout.axisNames(), layout.shape());
  Checkpoint checkpoint = Checkpoint::open(fixture);
  PipelineTraining training(
      model, layout, 2, 1, 32, *options, grid, 0,
      [&](const std::string &key, mlir::Type type, llvm::function_ref<Tensor(Tensor)> slice) {
        return bindParameter(checkpoint, key, type, "test", slice);
      });
  ASSERT_EQ(training.schedule().microbatches, 2);

  std::vector<FixtureStep> steps = fixtureSteps(fixture);
  Tensor tokens = readTokenBatch(fixture + "/tokens.json");
  // Evaluation runs the schedule's forwards alone.
  EXPECT_NEAR(training.evaluate({tokens}), steps[0].loss, 1e-5);
  for (int k = 0; k < 5; ++k) {
    PipelineTraining::StepResult r = training.step(tokens);
    EXPECT_NEAR(r.loss, steps[k].loss, 1e-5) << "step " << k;
    EXPECT_NEAR(r.gradNorm, steps[k].gradNorm, 1e-5) << "step " << k;
  }
  EXPECT_NEAR(training.evaluate({tokens, tokens}), steps[5].loss, 1e-5);
  auto want = SafeTensorsFile::open(fixture + "/weights_after_5_steps.safetensors");
  TensorMap mine = unstackTensors(training.parameters()); // a MoE layer's experts by HF key
  EXPECT_FALSE(mine.empty());
  for (const auto &[key, got] : mine) {
    Tensor expected = want->get(key);
    ASSERT_EQ(got.shape(), expected.shape()) << key;
    double worst = 0;
    for (int64_t i = 0; i < got.numel(); ++i)
      worst = std::max(worst,
                       std::abs(double(got.data<float>()[i]) - double(expected.data<float>()[i])));
    EXPECT_LT(worst, 1e-5) << key;
  }
  // Between them the ranks hold every tensor: each is counted once, by the
  // lowest rank holding it.
  Tensor held(DType::I64, {});
  for (const auto &[key, got] : mine) {
    (void)got;
    bool lower = false;
    if (key == "model.embed_tokens.weight")
      lower = training.pipelineRank() != 0;
    *held.mutableData<int64_t>() += lower ? 0 : 1;
  }
  int64_t total = *grid.allReduce(held, {0}, Reduction::Sum).data<int64_t>();
  EXPECT_EQ(total, int64_t(want->names().size()));
}

/// `got` holds every tensor of the fixture's `file` and nothing else, each
/// within `tolerance` of it.
void expectWithin(const TensorMap &got, const std::string &file, double tolerance,
                  const std::string &fixture = kFixture) {
  auto want = SafeTensorsFile::open(fixture + "/" + file);
  EXPECT_EQ(got.size(), want->names().size()) << file;
  for (const std::string &key : want->names()) {
    ASSERT_TRUE(got.count(key)) << file << ": " << key;
    Tensor expected = want->get(key);
    double worst = 0;
    for (int64_t i = 0; i < expected.numel(); ++i)
      worst = std::max(worst, std::abs(double(got.at(key).data<float>()[i]) -
                                       double(expected.data<float>()[i])));
    EXPECT_LT(worst, tolerance) << file << ": " << key;
  }
}

/// `fixture`'s expected.json run from its checkpoint under PP2, with
/// `extra` options.
TrainConfig fixtureRunConfig(std::vector<std::string> extra,
                             const std::string &fixture = kFixture) {
  std::vector<std::string> args = {"--model.hf_path=" + fixture,
                                   "--checkpoint.initial_load_path=" + fixture,
                                   "--checkpoint.initial_load_in_hf=true",
                                   "--training.seq_len=32",
                                   "--training.steps=5",
                                   "--training.max_norm=1.0",
                                   "--optimizer.lr=0.0008",
                                   "--optimizer.betas=[0.9,0.95]",
                                   "--optimizer.eps=1e-8",
                                   "--optimizer.weight_decay=0.1",
                                   "--lr_scheduler.warmup_steps=0",
                                   "--lr_scheduler.decay_ratio=0",
                                   "--parallelism.pipeline_parallel_degree=2"};
  args.insert(args.end(), extra.begin(), extra.end());
  return TrainConfig::load("", args);
}

} // namespace

// The Trainer runs a PipelineTraining when pipeline_parallel_degree > 1:
// its first gradients (within 1e-6, as TrainingTest holds one rank's), its
// steps, its evaluation and its gathered weights and optimizer state
// (each tensor from the lowest rank holding it, on every rank) are the
// fixture's, and the gathered weights hold every tensor of the checkpoint.
TEST(PipelineTraining, TrainerGathersWhatThePipelineRanksHold) {
  Trainer trainer(fixtureRunConfig({"--training.local_batch_size=2"}));
  std::vector<FixtureStep> steps = fixtureSteps(kFixture);
  Tensor tokens = readTokenBatch(kFixture + "/tokens.json");
  EXPECT_NEAR(trainer.evaluate({tokens}), steps[0].loss, 1e-5);
  // Transformers' gradients of the first step, gathered whole on every rank.
  expectWithin(trainer.gradients(tokens), "grads_step0.safetensors", 1e-6);
  for (int k = 0; k < 5; ++k)
    EXPECT_NEAR(trainer.step(tokens).loss, steps[k].loss, 1e-5);
  EXPECT_NEAR(trainer.evaluate({tokens}), steps[5].loss, 1e-5);
  expectWithin(trainer.parameters(), "weights_after_5_steps.safetensors", 1e-5);
  TensorMap state = trainer.optimizerState();
  EXPECT_EQ(state.size(), 2 * trainer.parameters().size());
  EXPECT_EQ(state.at(expAvgSqName("model.embed_tokens.weight")).shape(), Shape({512, 64}));
  // Each rank restores its moments from the whole state; a file missing one
  // (of another rank's stage too) is refused by name on every rank.
  std::string path =
      fmt::format("/tmp/kiln-pp-state-{}-{}.safetensors", ::getpid(), MpiWorld::get().rank());
  writeSafeTensors(path, state);
  trainer.restoreOptimizerState(*SafeTensorsFile::open(path), 5);
  EXPECT_EQ(trainer.updatesDone(), 5);
  state.erase(expAvgName("model.norm.weight"));
  writeSafeTensors(path, state);
  try {
    trainer.restoreOptimizerState(*SafeTensorsFile::open(path), 5);
    ADD_FAILURE() << "a missing moment was accepted";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("missing optimizer state 'exp_avg.model.norm.weight'"),
              std::string::npos)
        << e.what();
  }
  std::remove(path.c_str());
}

TEST(PipelineTraining, OneF1BOverTwoRanksEqualsTransformers) { expectFixtureRun("1F1B"); }

TEST(PipelineTraining, GPipeOverTwoRanksEqualsTransformers) { expectFixtureRun("GPipe"); }

// Four stages on four ranks (mpi-collectives-4-ranks runs it): the tied
// table's gradient is summed between ranks 0 and 3 alone, past two ranks
// that hold neither end.
TEST(PipelineOverFourRanks, GPipeEqualsTransformers) { expectFixtureRun("GPipe", kFixture, 4); }

TEST(PipelineTraining, MoeFixtureOverTwoRanksEqualsTransformers) {
  expectFixtureRun("1F1B", std::string(KILN_TEST_DATA_DIR) + "/qwen3-moe-tiny");
}

TEST(PipelineTraining, Interleaved1F1BOverTwoRanksEqualsTransformers) {
  expectFixtureRun("Interleaved1F1B");
}

// FSDP inside the stages (mpi-collectives-4-ranks runs it): pp 2 x dp_shard
// 2, each pipeline rank's stages partitioned over its two data-parallel
// ranks, each on its row of every microbatch (GPipe, one microbatch of the
// fixture's two rows). The gradients gathered from the shards, every step,
// the evaluation and the weights gathered after 5 steps are Transformers';
// the moments restored from whole tensors are sliced back to each rank as
// it held them.
TEST(PipelineOverFourRanks, FsdpInsideTheStagesEqualsTransformers) {
  Trainer trainer(fixtureRunConfig(
      {"--training.local_batch_size=1", "--parallelism.pipeline_parallel_schedule=GPipe"}));
  ASSERT_EQ(trainer.layout().dpShard, 2);
  std::vector<FixtureStep> steps = fixtureSteps(kFixture);
  Tensor tokens = readTokenBatch(kFixture + "/tokens.json");
  EXPECT_NEAR(trainer.evaluate({tokens}), steps[0].loss, 1e-5);
  expectWithin(trainer.gradients(tokens), "grads_step0.safetensors", 1e-6);
  for (int k = 0; k < 5; ++k) {
    StepMetrics r = trainer.step(tokens);
    EXPECT_NEAR(r.loss, steps[k].loss, 1e-5) << "step " << k;
    EXPECT_NEAR(r.gradNorm, steps[k].gradNorm, 1e-5) << "step " << k;
  }
  EXPECT_NEAR(trainer.evaluate({tokens}), steps[5].loss, 1e-5);
  expectWithin(trainer.parameters(), "weights_after_5_steps.safetensors", 1e-5);

  TensorMap state = trainer.optimizerState();
  EXPECT_EQ(state.at(expAvgSqName("model.embed_tokens.weight")).shape(), Shape({512, 64}));
  // Each rank writes the whole state with one moment changed, restores it
  // and gathers it back: every element comes back where it was.
  Tensor &changed = state.at(expAvgName("model.layers.2.mlp.down_proj.weight"));
  for (int64_t i = 0; i < changed.numel(); ++i)
    changed.mutableData<float>()[i] = float(i);
  std::string path =
      fmt::format("/tmp/kiln-pp-fsdp-state-{}-{}.safetensors", ::getpid(), MpiWorld::get().rank());
  writeSafeTensors(path, state);
  trainer.restoreOptimizerState(*SafeTensorsFile::open(path), 5);
  std::remove(path.c_str());
  TensorMap back = trainer.optimizerState();
  ASSERT_EQ(back.size(), state.size());
  for (const auto &[name, value] : state) {
    const Tensor &got = back.at(name);
    ASSERT_EQ(got.shape(), value.shape()) << name;
    EXPECT_EQ(std::memcmp(got.rawData(), value.rawData(), value.nbytes()), 0) << name;
  }
}

// EP inside the stages (mpi-collectives-4-ranks runs it): the MoE fixture
// at pp 2 x dp_shard 2 with its experts split over ep 2 of the dp_shard
// ranks, under both dispatchers (the experts' tokens gathered over ep, or
// sent by all-to-all), GPipe over the fixture's two rows: every step's loss
// and gradient norm and the weights after 5 steps are Transformers'.
TEST(PipelineOverFourRanks, ExpertsInsideTheStagesEqualTransformers) {
  const std::string fixture = std::string(KILN_TEST_DATA_DIR) + "/qwen3-moe-tiny";
  std::vector<FixtureStep> steps = fixtureSteps(fixture);
  Tensor tokens = readTokenBatch(fixture + "/tokens.json");
  for (const char *dispatch : {"all_gather", "all_to_all"}) {
    SCOPED_TRACE(dispatch);
    Trainer trainer(fixtureRunConfig({"--training.local_batch_size=1",
                                      "--parallelism.pipeline_parallel_schedule=GPipe",
                                      "--parallelism.expert_parallel_degree=2",
                                      std::string("--parallelism.expert_dispatch=") + dispatch},
                                     fixture));
    ASSERT_EQ(trainer.layout().ep, 2);
    for (int k = 0; k < 5; ++k) {
      StepMetrics r = trainer.step(tokens);
      EXPECT_NEAR(r.loss, steps[k].loss, 1e-5) << "step " << k;
      EXPECT_NEAR(r.gradNorm, steps[k].gradNorm, 1e-5) << "step " << k;
    }
    expectWithin(trainer.parameters(), "weights_after_5_steps.safetensors", 1e-5, fixture);
  }
}
