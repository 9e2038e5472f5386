//===- TrainCheckpointTest.cpp - Resumable training checkpoints -----------===//
//
// A full checkpoint restores a Trainer exactly (the moments, the update
// count, a MoE router's expert bias), finding and pruning step-N
// directories, and the errors a damaged checkpoint ends in.
//
//===----------------------------------------------------------------------===//

#include "TestUtil.h"
#include "kiln/Driver/TrainCheckpoint.h"
#include "kiln/Driver/Training.h"
#include "kiln/Runtime/TokenBatch.h"
#include "kiln/Support/Json.h"

#include <filesystem>
#include <fstream>

using namespace kiln;
using namespace kiln::test;
namespace fs = std::filesystem;

namespace {

/// A tiny fixture's run with a schedule that changes every step (warmup,
/// then linear decay), so a restored update count that is off shows.
TrainConfig runConfig(const std::string &fixture, std::vector<std::string> extra = {}) {
  std::string dir = dataPath(fixture);
  std::vector<std::string> args = {
      "--model.hf_path=" + dir, "--checkpoint.initial_load_path=" + dir,
      "--checkpoint.initial_load_in_hf=true", "--data.tokens_file=" + dir + "/tokens.json",
      "--training.steps=6", "--lr_scheduler.warmup_steps=2", "--lr_scheduler.decay_ratio=0.5"};
  args.insert(args.end(), extra.begin(), extra.end());
  return TrainConfig::load("", args);
}

/// A fresh directory under the test temp dir.
std::string freshDir(const std::string &name) {
  std::string dir = testing::TempDir() + "/kiln-traincheckpoint-" + name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

TrainState stateOf(const Trainer &trainer) {
  TrainState s;
  s.step = trainer.updatesDone();
  s.globalBatchSize = trainer.globalBatchSize();
  s.seqLen = trainer.config().training.seqLen;
  s.data = {{"source", "tokens"}, {"next_batch", s.step}, {"fingerprint", "f"}};
  s.config = trainer.config().toJson();
  return s;
}

void expectSameTensors(const TensorMap &a, const TensorMap &b) {
  ASSERT_EQ(a.size(), b.size());
  for (const auto &[name, t] : a) {
    ASSERT_TRUE(b.count(name)) << name;
    EXPECT_EQ(toDoubles(t), toDoubles(b.at(name))) << name;
  }
}

/// Two steps, a checkpoint, two more steps; a Trainer resumed from the
/// checkpoint takes the same two steps bit for bit.
void expectExactResume(const TrainConfig &config, const std::string &dir) {
  Tensor tokens = readTokenBatch(config.data.tokensFile);
  Trainer straight(config);
  straight.step(tokens);
  straight.step(tokens);
  TrainState state = stateOf(straight);
  saveTrainCheckpoint(straight, dir, &state, int64_t(1) << 30);
  TrainState read = TrainState::read(dir);
  EXPECT_EQ(read.step, 2);
  EXPECT_EQ(read.toJson(), state.toJson());

  Trainer resumed(config, dir);
  restoreTrainCheckpoint(resumed, dir, read);
  EXPECT_EQ(resumed.updatesDone(), 2);
  expectSameTensors(resumed.optimizerState(), straight.optimizerState());
  for (int k = 0; k < 2; ++k) {
    StepMetrics a = straight.step(tokens), b = resumed.step(tokens);
    EXPECT_EQ(a.step, b.step);
    EXPECT_EQ(a.loss, b.loss) << "step " << a.step;
    EXPECT_EQ(a.gradNorm, b.gradNorm) << "step " << a.step;
    EXPECT_EQ(a.lr, b.lr) << "step " << a.step;
  }
  expectSameTensors(resumed.parameters(), straight.parameters());
  expectSameTensors(resumed.optimizerState(), straight.optimizerState());
}

void writeText(const std::string &path, const std::string &text) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path) << text;
}

} // namespace

TEST(TrainCheckpoint, DenseResumeIsBitIdentical) {
  TrainConfig config = runConfig("qwen3-dense-tiny");
  std::string dir = freshDir("dense") + "/step-2";
  expectExactResume(config, dir);
  // Both moments of every parameter, by state name.
  auto file = SafeTensorsFile::open(dir + "/" + kOptimizerStateFile);
  EXPECT_TRUE(file->contains("exp_avg.model.norm.weight"));
  EXPECT_TRUE(file->contains("exp_avg_sq.model.embed_tokens.weight"));
  EXPECT_EQ(file->names().size(), 2 * Checkpoint::open(dir).names().size());
}

TEST(TrainCheckpoint, MoeExpertBiasIsRestored) {
  TrainConfig config = runConfig("qwen3-moe-tiny", {"--model.load_balance_coeff=0.01"});
  std::string dir = freshDir("moe") + "/step-2";
  expectExactResume(config, dir);
  auto file = SafeTensorsFile::open(dir + "/" + kOptimizerStateFile);
  int biases = 0;
  for (const std::string &name : file->names())
    if (name.rfind("expert_bias.", 0) == 0) {
      ++biases;
      // Two updates of aux-loss-free balancing have moved it off zero.
      std::vector<double> bias = toDoubles(file->get(name));
      EXPECT_TRUE(std::any_of(bias.begin(), bias.end(), [](double b) { return b != 0; }))
          << name;
    }
  EXPECT_GT(biases, 0);
}

TEST(TrainCheckpoint, RestoreRefusesStateOfAnotherModel) {
  TrainConfig config = runConfig("qwen3-dense-tiny");
  Trainer trainer(config);
  TensorMap state = trainer.optimizerState();
  std::string dir = freshDir("refuse");
  auto restoreFrom = [&](const TensorMap &tensors) {
    writeSafeTensors(dir + "/opt.safetensors", tensors);
    trainer.restoreOptimizerState(*SafeTensorsFile::open(dir + "/opt.safetensors"), 3);
  };
  TensorMap extra = state;
  extra.emplace("exp_avg.model.layers.9.mlp.up_proj.weight", Tensor(DType::F32, {2}));
  EXPECT_THROW(
      {
        try {
          restoreFrom(extra);
        } catch (const Error &e) {
          EXPECT_THAT(e.what(), testing::HasSubstr("optimizer state "
                                                   "'exp_avg.model.layers.9.mlp.up_proj.weight' "
                                                   "belongs to no parameter"));
          throw;
        }
      },
      Error);
  TensorMap half = state;
  half["exp_avg.model.norm.weight"] = state.at("exp_avg.model.norm.weight").to(DType::F16);
  EXPECT_THROW(
      {
        try {
          restoreFrom(half);
        } catch (const Error &e) {
          EXPECT_THAT(e.what(), testing::HasSubstr("'exp_avg.model.norm.weight' is F16 [64], "
                                                   "but this model needs F32 [64]"));
          throw;
        }
      },
      Error);
  // A refused restore keeps the state it had; a good one sets the count.
  EXPECT_EQ(trainer.updatesDone(), 0);
  restoreFrom(state);
  EXPECT_EQ(trainer.updatesDone(), 3);
}

TEST(TrainCheckpoint, FindsTheNewestResumableStep) {
  std::string folder = freshDir("find");
  TrainConfig::Checkpoint c;
  c.folder = folder;
  EXPECT_FALSE(findResumeCheckpoint(c)); // empty: a fresh start
  for (const char *dir : {"step-2", "step-10", "step-30"})
    writeText(folder + "/" + dir + "/" + kTrainStateFile, "{}");
  writeText(folder + "/step-40/config.json", "{}");                   // model only
  writeText(folder + "/step-50.tmp.123/" + std::string(kTrainStateFile), "{}"); // killed save
  writeText(folder + "/step-x/" + std::string(kTrainStateFile), "{}");
  writeText(folder + "/step-60", "a file");
  std::map<int64_t, std::string> steps = checkpointSteps(folder);
  std::vector<int64_t> numbers;
  for (const auto &[n, dir] : steps)
    numbers.push_back(n);
  EXPECT_EQ(numbers, (std::vector<int64_t>{2, 10, 30, 40}));
  EXPECT_EQ(findResumeCheckpoint(c), folder + "/step-30"); // numeric, not name order
  c.loadStep = 10;
  EXPECT_EQ(findResumeCheckpoint(c), folder + "/step-10");
  c.loadStep = 40;
  EXPECT_THROW(findResumeCheckpoint(c), Error);
  c.loadStep = 3;
  EXPECT_THROW(findResumeCheckpoint(c), Error);
}

TEST(TrainCheckpoint, PruneKeepsTheNewest) {
  std::string folder = freshDir("prune");
  for (const char *dir : {"step-1", "step-2", "step-9", "step-10", "step-11.tmp.5"})
    writeText(folder + "/" + dir + "/config.json", "{}");
  pruneCheckpoints(folder, 0); // keep all
  EXPECT_EQ(checkpointSteps(folder).size(), 4u);
  pruneCheckpoints(folder, 2);
  std::vector<std::string> left;
  for (const auto &entry : fs::directory_iterator(folder))
    left.push_back(entry.path().filename().string());
  std::sort(left.begin(), left.end());
  EXPECT_EQ(left, (std::vector<std::string>{"step-10", "step-11.tmp.5", "step-9"}));
}

TEST(TrainCheckpoint, ReadRefusesInconsistentState) {
  std::string dir = freshDir("read");
  TrainState good;
  good.step = 4;
  good.globalBatchSize = 2;
  good.seqLen = 32;
  good.data = {{"source", "tokens"}, {"next_batch", 4}, {"fingerprint", "f"}};
  good.config = nlohmann::json::object();
  auto expectError = [&](nlohmann::json doc, const std::string &message) {
    writeText(dir + "/" + kTrainStateFile, doc.dump());
    try {
      TrainState::read(dir);
      ADD_FAILURE() << "accepted " << doc.dump();
    } catch (const Error &e) {
      EXPECT_THAT(e.what(), testing::HasSubstr(message));
      EXPECT_THAT(e.what(), testing::HasSubstr(kTrainStateFile));
    }
  };
  writeText(dir + "/" + kTrainStateFile, good.toJson().dump());
  EXPECT_EQ(TrainState::read(dir).step, 4);
  nlohmann::json doc = good.toJson();
  doc["step"] = -1;
  expectError(doc, "field 'step' must be >= 0, got -1");
  doc = good.toJson();
  doc["data"]["next_batch"] = 3;
  expectError(doc, "field 'data.next_batch' is 3, but 4 steps were trained");
  doc = good.toJson();
  doc["seq_len"] = "32";
  expectError(doc, "field 'seq_len' must be an integer");
  doc = good.toJson();
  doc["config"] = 1;
  expectError(doc, "fields 'data' and 'config' must be objects");
  expectError(nlohmann::json::array(), "expected a JSON object");
}
