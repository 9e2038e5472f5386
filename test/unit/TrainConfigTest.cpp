//===- TrainConfigTest.cpp - `kiln train` run configuration ---------------===//

#include "TestUtil.h"
#include "kiln/Driver/ParallelLayout.h"
#include "kiln/Driver/TrainConfig.h"
#include "kiln/Support/Json.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>

using namespace kiln;
using kiln::test::expectError;
using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

const std::string kFlavor = "--model.flavor=qwen3-0.6b";

/// A JSON config file in a fresh /tmp directory, removed on destruction.
class ConfigFile {
public:
  explicit ConfigFile(const std::string &text) {
    char tmpl[] = "/tmp/kiln-trainconfig-XXXXXX";
    if (!::mkdtemp(tmpl))
      throw std::runtime_error("mkdtemp failed");
    dir_ = tmpl;
    std::ofstream(path()) << text;
  }
  ~ConfigFile() {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::string path() const { return dir_ + "/run.json"; }

private:
  std::string dir_;
};

TrainConfig withOverrides(std::vector<std::string> overrides) {
  overrides.insert(overrides.begin(), kFlavor);
  return TrainConfig::load("", overrides);
}

/// Loading `text` as a file must fail naming the file and every fragment.
void expectFileError(const std::string &text, std::vector<std::string> fragments) {
  ConfigFile file(text);
  fragments.insert(fragments.begin(), file.path() + ": ");
  expectError([&] { TrainConfig::load(file.path(), {kFlavor}); }, fragments);
}

/// Applying `override` must fail as a command-line error with `fragments`.
void expectOverrideError(const std::string &override, std::vector<std::string> fragments) {
  SCOPED_TRACE(override);
  fragments.insert(fragments.begin(), "command line: ");
  expectError([&] { withOverrides({override}); }, fragments);
}

} // namespace

TEST(TrainConfig, DefaultsMatchTorchtitan) {
  TrainConfig c = withOverrides({});
  EXPECT_EQ(c.model.flavor, "qwen3-0.6b");
  EXPECT_EQ(c.model.hfPath, "");
  EXPECT_EQ(c.training.steps, 10000);
  EXPECT_EQ(c.training.localBatchSize, 8);
  EXPECT_EQ(c.training.seqLen, 2048);
  EXPECT_EQ(c.training.maxNorm, 1.0);
  EXPECT_EQ(c.training.seed, 0);
  EXPECT_EQ(c.optimizer.name, "AdamW");
  EXPECT_EQ(c.optimizer.lr, 8e-4);
  EXPECT_EQ(c.optimizer.betas, (std::array<double, 2>{0.9, 0.95}));
  EXPECT_EQ(c.optimizer.eps, 1e-8);
  EXPECT_EQ(c.optimizer.weightDecay, 0.1);
  EXPECT_EQ(c.lrScheduler.warmupSteps, 200);
  EXPECT_FALSE(c.lrScheduler.decayRatio.has_value());
  EXPECT_EQ(c.lrScheduler.decayType, DecayType::Linear);
  EXPECT_EQ(c.lrScheduler.minLrFactor, 0.0);
  EXPECT_EQ(c.checkpoint.folder, "checkpoint");
  EXPECT_EQ(c.checkpoint.initialLoadPath, "");
  EXPECT_FALSE(c.checkpoint.initialLoadInHf);
  EXPECT_FALSE(c.checkpoint.lastSaveInHf);
  EXPECT_EQ(c.checkpoint.interval, 500);
  EXPECT_FALSE(c.checkpoint.enable);
  EXPECT_TRUE(c.checkpoint.lastSaveModelOnly);
  EXPECT_EQ(c.checkpoint.keepLatestK, 10);
  EXPECT_EQ(c.checkpoint.loadStep, -1);
  EXPECT_EQ(c.checkpoint.maxShardBytes, 2000000000);
  EXPECT_EQ(c.activationCheckpoint.mode, CheckpointMode::None);
  EXPECT_EQ(c.activationCheckpoint.selectiveAcOption, "2");
  EXPECT_EQ(c.metrics.logFreq, 10);
  EXPECT_EQ(c.metrics.jsonl, "");
  EXPECT_EQ(c.data.tokensFile, "");
  EXPECT_EQ(c.debug.saveGrads, "");
}

// training.global_batch_size: microbatches of local_batch_size x dp rows.
TEST(TrainConfig, GlobalBatchSizeGivesMicrobatches) {
  TrainConfig c = withOverrides({"--training.local_batch_size=2"});
  EXPECT_EQ(c.training.microbatches(4), 1); // -1: one microbatch
  c = withOverrides({"--training.local_batch_size=2", "--training.global_batch_size=24"});
  EXPECT_EQ(c.training.microbatches(1), 12);
  EXPECT_EQ(c.training.microbatches(4), 3);
  EXPECT_EQ(c.training.microbatches(12), 1);
  expectError([&] { c.training.microbatches(8); },
              {"training.global_batch_size = 24 must be a multiple of training.local_batch_size "
               "= 2 x the data-parallel degree 8"});
  // Smaller than one microbatch, and a product that would overflow.
  expectError([&] { c.training.microbatches(24); }, {"must be a multiple"});
  c = withOverrides({"--training.local_batch_size=4611686018427387904",
                     "--training.global_batch_size=8"});
  expectError([&] { c.training.microbatches(4); }, {"must be a multiple"});
  expectError([] { withOverrides({"--training.global_batch_size=-2"}); },
              {"'training.global_batch_size' must be -1 or > 0, got -2"});
}

TEST(TrainConfig, ToJsonListsEveryKeyAndRoundTrips) {
  TrainConfig c = withOverrides({});
  json expected = json::parse(R"({
    "model": {"hf_path": "", "flavor": "qwen3-0.6b", "converters": []},
    "float8": {"recipe_name": "rowwise", "filter_fqns": []},
    "training": {"steps": 10000, "local_batch_size": 8, "global_batch_size": -1, "seq_len": 2048,
                 "max_norm": 1.0, "seed": 0, "mixed_precision_param": "",
                 "mixed_precision_reduce": "float32"},
    "optimizer": {"name": "AdamW", "lr": 0.0008, "betas": [0.9, 0.95],
                  "eps": 1e-8, "weight_decay": 0.1},
    "lr_scheduler": {"warmup_steps": 200, "decay_ratio": null,
                     "decay_type": "linear", "min_lr_factor": 0.0},
    "activation_checkpoint": {"mode": "none", "selective_ac_option": "2"},
    "checkpoint": {"enable": false, "folder": "checkpoint", "initial_load_path": "",
                   "initial_load_in_hf": false, "last_save_model_only": true,
                   "last_save_in_hf": false, "interval": 500, "keep_latest_k": 10,
                   "load_step": -1, "max_shard_bytes": 2000000000},
    "metrics": {"log_freq": 10, "jsonl": "", "eval_freq": 0, "loss_curve": "",
                "enable_tensorboard": false, "save_tb_folder": "tb"},
    "data": {"source": "tokens", "tokens_file": "", "path": "", "tokenizer": "",
             "seq_len": 0, "seed": 0, "validation_fraction": 0.0, "cache_dir": "",
             "save_validation_tokens": ""},
    "parallelism": {"data_parallel_replicate_degree": 1, "data_parallel_shard_degree": -1,
                    "tensor_parallel_degree": 1, "expert_parallel_degree": 1,
                    "expert_dispatch": "all_gather", "expert_capacity_factor": 0.0,
                    "enable_sequence_parallel": true,
                    "context_parallel_degree": 1, "context_parallel_load_balancer": "headtail",
                    "fsdp_reshard_after_forward": "default",
                    "pipeline_parallel_degree": 1, "pipeline_parallel_schedule": "1F1B",
                    "pipeline_parallel_microbatch_size": 1,
                    "pipeline_parallel_layers_per_stage": 0,
                    "pipeline_parallel_first_stage_less_layers": 1,
                    "pipeline_parallel_last_stage_less_layers": 1,
                    "module_fqns_per_model_part": [], "world_size": 0},
    "override": {"rules": [], "files": []},
    "target": {"name": "", "lnc": 2, "neuron_max_communicators": 16},
    "compile": {"enable": false, "backend": "cpu", "artifact": ""},
    "debug": {"save_grads": "", "kill_during_save": 0, "kill_during_compile": false,
              "fail_collective_on_rank": -1}
  })");
  EXPECT_EQ(c.toJson(), expected);

  // The logged config is itself a valid config file reproducing the run.
  TrainConfig changed = withOverrides({"--training.steps=7", "--lr_scheduler.decay_ratio=0.25",
                                       "--checkpoint.last_save_in_hf=true"});
  ConfigFile file(changed.toJson().dump());
  EXPECT_EQ(TrainConfig::load(file.path(), {}).toJson(), changed.toJson());
}

TEST(TrainConfig, FileThenOverridesInOrder) {
  ConfigFile file(R"({"model": {"hf_path": "/models/q"},
                      "training": {"steps": 100, "seq_len": 512},
                      "optimizer": {"lr": 1e-3, "name": "adamw"},
                      "checkpoint": {"initial_load_in_hf": true}})");
  TrainConfig c = TrainConfig::load(
      file.path(), {"--training.steps=5", "training.steps=6", "--metrics.jsonl=out/m.jsonl",
                    "--optimizer.lr=2", "--training.max_norm=0.5"});
  EXPECT_EQ(c.model.hfPath, "/models/q");
  EXPECT_EQ(c.training.steps, 6) << "later overrides win";
  EXPECT_EQ(c.training.seqLen, 512) << "file values survive";
  EXPECT_EQ(c.training.localBatchSize, 8) << "untouched keys keep defaults";
  EXPECT_EQ(c.optimizer.lr, 2.0) << "numbers accept integers";
  EXPECT_EQ(c.optimizer.name, "adamw");
  EXPECT_EQ(c.training.maxNorm, 0.5);
  EXPECT_TRUE(c.checkpoint.initialLoadInHf);
  EXPECT_EQ(c.metrics.jsonl, "out/m.jsonl");
}

TEST(TrainConfig, OverrideValuesParseAsJsonElseString) {
  TrainConfig c = withOverrides({"--optimizer.lr=1e-3", "--checkpoint.last_save_in_hf=true",
                                 "--data.tokens_file=2024", "--debug.save_grads=\"g.st\"",
                                 "--checkpoint.folder=a=b"});
  EXPECT_EQ(c.optimizer.lr, 1e-3);
  EXPECT_TRUE(c.checkpoint.lastSaveInHf);
  EXPECT_EQ(c.data.tokensFile, "2024") << "string keys keep JSON-looking text";
  EXPECT_EQ(c.debug.saveGrads, "g.st") << "a JSON string is unquoted";
  EXPECT_EQ(c.checkpoint.folder, "a=b") << "only the first '=' splits";
}

TEST(TrainConfig, Betas) {
  ConfigFile file(R"({"model": {"flavor": "f"}, "optimizer": {"betas": [0.8, 0.99]}})");
  EXPECT_EQ(TrainConfig::load(file.path(), {}).optimizer.betas,
            (std::array<double, 2>{0.8, 0.99}));
  EXPECT_EQ(TrainConfig::load(file.path(), {"--optimizer.betas=[0, 0.5]"}).optimizer.betas,
            (std::array<double, 2>{0.0, 0.5}));
}

TEST(TrainConfig, DecayRatioNullOrNumber) {
  ConfigFile file(R"({"model": {"flavor": "f"}, "lr_scheduler": {"decay_ratio": 0.5}})");
  EXPECT_EQ(TrainConfig::load(file.path(), {}).lrScheduler.decayRatio, 0.5);
  TrainConfig c = TrainConfig::load(file.path(), {"--lr_scheduler.decay_ratio=null"});
  EXPECT_FALSE(c.lrScheduler.decayRatio.has_value());
  EXPECT_TRUE(c.toJson()["lr_scheduler"]["decay_ratio"].is_null());
  EXPECT_EQ(withOverrides({"--lr_scheduler.decay_ratio=1"}).lrScheduler.decayRatio, 1.0);
}

//===----------------------------------------------------------------------===//
// Errors
//===----------------------------------------------------------------------===//

TEST(TrainConfig, FileStructureErrors) {
  expectFileError(R"({"trainng": {"steps": 1}})", {"unknown section 'trainng'", "training"});
  expectFileError(R"({"training": {"stepz": 1}})", {"unknown key 'training.stepz'", "steps"});
  expectFileError(R"({"training": 5})", {"section 'training' must be an object, got 5"});
  expectFileError(R"({"training": {"steps": 1},)", {"malformed JSON"});
  expectFileError("[1, 2]", {"expected a JSON object"});
  std::string missing = "/tmp/kiln-no-such-dir/run.json";
  expectError([&] { TrainConfig::load(missing, {kFlavor}); }, {missing, "cannot open"});
}

TEST(TrainConfig, TypeErrorsNameKeyAndValue) {
  expectFileError(R"({"training": {"steps": "ten"}})",
                  {"'training.steps' must be an integer, got \"ten\""});
  expectFileError(R"({"training": {"steps": 5.0}})", {"'training.steps' must be an integer"});
  expectFileError(R"({"optimizer": {"lr": "fast"}})", {"'optimizer.lr' must be a number"});
  expectFileError(R"({"model": {"flavor": 3}})", {"'model.flavor' must be a string, got 3"});
  expectFileError(R"({"checkpoint": {"last_save_in_hf": 1}})",
                  {"'checkpoint.last_save_in_hf' must be true or false, got 1"});
  expectFileError(R"({"lr_scheduler": {"decay_ratio": "half"}})",
                  {"'lr_scheduler.decay_ratio' must be a number or null"});
  expectFileError(R"({"optimizer": {"betas": [0.9]}})",
                  {"'optimizer.betas' must be an array of 2 numbers, got [0.9]"});
  expectFileError(R"({"training": {"seed": 18446744073709551615}})",
                  {"'training.seed' = 18446744073709551615 is out of range"});
  expectOverrideError("--training.steps=ten", {"'training.steps' must be an integer, got \"ten\""});
  expectOverrideError("--checkpoint.initial_load_in_hf=yes",
                      {"'checkpoint.initial_load_in_hf' must be true or false, got \"yes\""});
  expectOverrideError("--optimizer.betas=0.9", {"'optimizer.betas' must be an array of 2 numbers"});
}

TEST(TrainConfig, OverrideSyntaxErrors) {
  for (std::string bad : {"--training.steps", "--steps=5", "--.steps=5", "--training.=5"})
    expectOverrideError(bad, {"override '" + bad + "' must have the form --section.key=value"});
  expectOverrideError("--trainng.steps=5", {"unknown section 'trainng'"});
  expectOverrideError("--training.stepz=5", {"unknown key 'training.stepz'"});
}

// An unknown key names the nearest known one, when one is near (a third of
// its letters changed at most), across sections too.
TEST(TrainConfig, UnknownKeysSuggestTheNearest) {
  expectOverrideError("--training.seqlen=5", {"did you mean 'training.seq_len'?"});
  expectOverrideError("--trainng.steps=5", {"did you mean 'training.steps'?"});
  expectOverrideError("--metric.log_freq=5", {"did you mean 'metrics.log_freq'?"});
  expectFileError(R"({"optimiser": {"lr": 0.1}})", {"did you mean 'optimizer.lr'?"});
  expectFileError(R"({"training": {"stepz": 1}})", {"did you mean 'training.steps'?"});
  try {
    TrainConfig::load("", {kFlavor, "--training.zzzzzzzzzz=1"});
    FAIL() << "an unknown key was accepted";
  } catch (const Error &e) {
    EXPECT_EQ(std::string(e.what()).find("did you mean"), std::string::npos) << e.what();
  }
}

// The schema `kiln help` and docs/cli.md show is the parser's own: every key
// it lists is accepted with its default, which a default config holds.
TEST(TrainConfig, SchemaListsEveryKeyTheParserReads) {
  std::vector<ConfigKey> keys = TrainConfig::schema();
  nlohmann::json defaults = TrainConfig().toJson();
  size_t counted = 0;
  for (const auto &[section, body] : defaults.items())
    counted += body.size();
  EXPECT_EQ(keys.size(), counted);
  for (const ConfigKey &k : keys) {
    EXPECT_EQ(defaults[k.section][k.key], k.defaultValue) << k.section << "." << k.key;
    EXPECT_FALSE(k.description.empty()) << k.section << "." << k.key;
    EXPECT_FALSE(k.type.empty()) << k.section << "." << k.key;
  }
  auto steps = std::find_if(keys.begin(), keys.end(), [](const ConfigKey &k) {
    return k.section == "training" && k.key == "steps";
  });
  ASSERT_NE(steps, keys.end());
  EXPECT_EQ(steps->type, "integer");
  EXPECT_EQ(steps->allowed, "> 0");
}

TEST(TrainConfig, RangeErrors) {
  struct Case {
    std::string override, message;
  };
  const std::vector<Case> cases = {
      {"training.steps=0", "'training.steps' must be > 0, got 0"},
      {"training.local_batch_size=-1", "'training.local_batch_size' must be > 0, got -1"},
      {"training.seq_len=0", "'training.seq_len' must be > 0"},
      {"training.max_norm=0", "'training.max_norm' must be > 0"},
      {"training.mixed_precision_param=fp16",
       "'training.mixed_precision_param' must be one of \"float32\", \"bfloat16\", got \"fp16\""},
      {"training.mixed_precision_reduce=bfloat16",
       "'training.mixed_precision_reduce' must be one of \"float32\", got \"bfloat16\""},
      {"optimizer.lr=0", "'optimizer.lr' must be > 0"},
      {"optimizer.eps=-1e-8", "'optimizer.eps' must be > 0"},
      {"optimizer.weight_decay=-0.1", "'optimizer.weight_decay' must be >= 0"},
      {"optimizer.betas=[0.9,1]", "'optimizer.betas' must be two numbers in [0, 1), got [0.9,1]"},
      {"optimizer.betas=[-0.1,0.9]", "'optimizer.betas' must be two numbers in [0, 1)"},
      {"optimizer.name=SGD", "'optimizer.name' must be one of \"AdamW\""},
      {"lr_scheduler.warmup_steps=-1", "'lr_scheduler.warmup_steps' must be >= 0"},
      {"lr_scheduler.decay_ratio=1.5", "'lr_scheduler.decay_ratio' must be in [0, 1]"},
      {"lr_scheduler.decay_type=exp",
       "'lr_scheduler.decay_type' must be one of \"linear\", \"sqrt\", \"cosine\", got \"exp\""},
      {"lr_scheduler.min_lr_factor=2", "'lr_scheduler.min_lr_factor' must be in [0, 1]"},
      {"checkpoint.interval=0", "'checkpoint.interval' must be > 0"},
      {"checkpoint.max_shard_bytes=0", "'checkpoint.max_shard_bytes' must be > 0"},
      {"checkpoint.keep_latest_k=-1", "'checkpoint.keep_latest_k' must be >= 0, got -1"},
      {"checkpoint.load_step=-2", "'checkpoint.load_step' must be -1 (the latest) or >= 0, got -2"},
      {"debug.kill_during_save=-1", "'debug.kill_during_save' must be >= 0"},
      {"metrics.log_freq=0", "'metrics.log_freq' must be > 0"},
      {"activation_checkpoint.mode=partial",
       "'activation_checkpoint.mode' must be one of \"none\", \"selective\", \"full\", got "
       "\"partial\""},
  };
  for (const Case &c : cases)
    expectOverrideError("--" + c.override, {c.message});
  // The same checks apply to file values, naming the file.
  expectFileError(R"({"training": {"steps": -3}})", {"'training.steps' must be > 0, got -3"});
  // Boundary values are accepted.
  TrainConfig ok = withOverrides({"--lr_scheduler.warmup_steps=0", "--optimizer.weight_decay=0",
                                  "--optimizer.betas=[0,0.999]", "--lr_scheduler.min_lr_factor=1",
                                  "--lr_scheduler.decay_ratio=0",
                                  "--lr_scheduler.decay_type=cosine",
                                  "--optimizer.name=ADAMW", "--checkpoint.keep_latest_k=0",
                                  "--checkpoint.load_step=0"});
  EXPECT_EQ(ok.lrScheduler.decayType, DecayType::Cosine);
}

TEST(TrainConfig, SelectiveAcOptionIsOpOrAPositiveInteger) {
  // torchtitan's option is a string: "op", or N to checkpoint every N-th layer.
  for (std::string bad : {"0", "-1", "ops", "2.5", "", "1e3", "00"})
    expectOverrideError("--activation_checkpoint.selective_ac_option=" + bad,
                        {"'activation_checkpoint.selective_ac_option' must be \"op\" or a "
                         "positive integer N (checkpoint every N-th layer)"});
  expectFileError(R"({"activation_checkpoint": {"selective_ac_option": 2}})",
                  {"'activation_checkpoint.selective_ac_option' must be a string, got 2"});
  TrainConfig op = withOverrides({"--activation_checkpoint.mode=selective",
                                  "--activation_checkpoint.selective_ac_option=op"});
  EXPECT_EQ(op.activationCheckpoint.selectiveAcOption, "op");
  // A command line's "3" stays the string it was typed as.
  TrainConfig three = withOverrides({"--activation_checkpoint.selective_ac_option=3"});
  EXPECT_EQ(three.activationCheckpoint.selectiveAcOption, "3");
}

TEST(TrainConfig, ExactlyOneModelSource) {
  const std::string message = "model: set exactly one of model.hf_path and model.flavor";
  expectError([&] { TrainConfig::load("", {}); }, {message, "neither"});
  expectError([&] { withOverrides({"--model.hf_path=/m"}); }, {message, "both"});
  // Clearing one source via an override makes the other the only one.
  ConfigFile file(R"({"model": {"flavor": "f"}})");
  TrainConfig c = TrainConfig::load(file.path(), {"--model.flavor=", "--model.hf_path=/m"});
  EXPECT_EQ(c.model.hfPath, "/m");
  EXPECT_EQ(c.model.flavor, "");
}

namespace {

Qwen3Config layoutModel() {
  Qwen3Config m;
  m.name = "m";
  m.numHeads = 16;
  m.numKvHeads = 8;
  m.vocabSize = 151936;
  return m;
}

ParallelLayout layoutOf(const std::vector<std::string> &overrides, int64_t world,
                        int64_t seq = 128) {
  TrainConfig c = TrainConfig::load("", [&] {
    std::vector<std::string> all{"--model.flavor=qwen3-0.6b"};
    all.insert(all.end(), overrides.begin(), overrides.end());
    return all;
  }());
  return ParallelLayout::resolve(c.parallelism, layoutModel(), seq, world);
}

TEST(ParallelLayout, ShardDegreeMinusOneTakesTheRestOfTheWorld) {
  ParallelLayout l = layoutOf({"--parallelism.tensor_parallel_degree=2"}, 8);
  EXPECT_EQ(l.shape(), (std::vector<int64_t>{1, 4, 2}));
  EXPECT_TRUE(l.sequenceParallel);
  EXPECT_EQ(l.dataParallelDegree(), 4);
  ParallelLayout one = layoutOf({}, 1);
  EXPECT_EQ(one.worldSize(), 1);
  EXPECT_FALSE(one.sequenceParallel); // tp = 1: nothing to split
  ParallelLayout compileOnly = layoutOf({"--parallelism.world_size=64"}, 1);
  EXPECT_EQ(compileOnly.dpShard, 64);
}

// Context parallelism: an axis cp before tp whose ranks share the rows (the
// data-parallel degree leaves it out) and split the sequence, head-tail by
// default (2 x cp chunks, torchtitan's default balancer).
TEST(ParallelLayout, ContextParallelSplitsTheSequenceNotTheRows) {
  ParallelLayout l = layoutOf(
      {"--parallelism.context_parallel_degree=2", "--parallelism.tensor_parallel_degree=2"}, 16);
  EXPECT_EQ(l.axisNames(), (std::vector<std::string>{"dp_replicate", "dp_shard", "cp", "tp"}));
  EXPECT_EQ(l.shape(), (std::vector<int64_t>{1, 4, 2, 2}));
  EXPECT_EQ(l.dataParallelDegree(), 4);
  EXPECT_EQ(l.sequenceLayout().headTailChunks, 4);
  EXPECT_EQ(l.cpSummary(), " x cp 2 (head-tail sequence)");
  ParallelLayout contiguous = layoutOf({"--parallelism.context_parallel_degree=4",
                                        "--parallelism.context_parallel_load_balancer=none"},
                                       4, 36);
  EXPECT_EQ(contiguous.sequenceLayout().headTailChunks, 0);
  expectError(
      [&] { layoutOf({"--parallelism.context_parallel_degree=4"}, 4, 36); },
      {"training.seq_len=36 must be divisible by 8", "context_parallel_degree=4", "headtail"});
  expectError(
      [&] { layoutOf({"--parallelism.context_parallel_degree=3"}, 4); },
      {"context_parallel_degree x tensor_parallel_degree = 1 x 3 x 1 = 3", "world of 4 ranks"});
  // With pp, the outermost axis, each stage's ranks split the sequence.
  ParallelLayout staged = layoutOf(
      {"--parallelism.context_parallel_degree=2", "--parallelism.pipeline_parallel_degree=2"}, 4);
  EXPECT_EQ(staged.axisNames(),
            (std::vector<std::string>{"pp", "dp_replicate", "dp_shard", "cp", "tp"}));
  EXPECT_EQ(staged.shape(), (std::vector<int64_t>{2, 1, 1, 2, 1}));
  EXPECT_EQ(staged.sequenceLayout().headTailChunks, 4);
}

TEST(ParallelLayout, InvalidLayoutsNameTheOptionAndTheNumbers) {
  using V = std::vector<std::string>;
  expectError([&] { layoutOf({"--parallelism.data_parallel_shard_degree=3"}, 4); },
              {"1 x 3 x 1 = 3", "world has 4 ranks"});
  expectError([&] { layoutOf({"--parallelism.tensor_parallel_degree=3"}, 6); },
              {"tensor_parallel_degree=3 must divide num_attention_heads=16"});
  expectError([&] { layoutOf(V{"--parallelism.tensor_parallel_degree=16"}, 16); },
              {"tensor_parallel_degree=16 must divide num_key_value_heads=8"});
  expectError(
      [&] {
        Qwen3Config odd = layoutModel();
        odd.vocabSize = 151937;
        TrainConfig c = TrainConfig::load("", {"--model.flavor=x",
                                               "--parallelism.tensor_parallel_degree=2"});
        ParallelLayout::resolve(c.parallelism, odd, 128, 2);
      },
      {"must divide vocab_size=151937", "does not pad"});
  expectError([&] { layoutOf({"--parallelism.tensor_parallel_degree=4"}, 4, 30); },
              {"training.seq_len=30", "tensor_parallel_degree=4", "sequence parallelism"});
  EXPECT_NO_THROW(layoutOf({"--parallelism.tensor_parallel_degree=4",
                            "--parallelism.enable_sequence_parallel=false"},
                           4, 30));
  expectError(
      [&] { layoutOf({"--parallelism.data_parallel_replicate_degree=3"}, 4); },
      {"data_parallel_replicate_degree x tensor_parallel_degree = 3 x 1 = 3", "world of 4 ranks"});
  expectError([&] { layoutOf({"--parallelism.world_size=8"}, 4); },
              {"world_size=8", "started 4 ranks"});
  expectError([&] { layoutOf({"--parallelism.data_parallel_shard_degree=0"}, 4); },
              {"'parallelism.data_parallel_shard_degree' must be -1 or > 0, got 0"});
  expectError([&] { layoutOf({"--parallelism.fsdp_reshard_after_forward=sometimes"}, 1); },
              {"fsdp_reshard_after_forward", "\"default\", \"always\", \"never\""});
}

TEST(ParallelLayout, PipelineIsTheOutermostAxis) {
  Qwen3Config model = layoutModel();
  model.numLayers = 6;
  auto resolve = [&](std::vector<std::string> options, int64_t world) {
    options.insert(options.begin(), "--model.flavor=x");
    TrainConfig c = TrainConfig::load("", options);
    return ParallelLayout::resolve(c.parallelism, model, 128, world);
  };
  ParallelLayout l =
      resolve({"--parallelism.pipeline_parallel_degree=2", "--parallelism.tensor_parallel_degree=2",
               "--parallelism.pipeline_parallel_microbatch_size=2"},
              8);
  EXPECT_EQ(l.shape(), (std::vector<int64_t>{2, 1, 2, 2}));
  EXPECT_EQ(l.axisNames(), (std::vector<std::string>{"pp", "dp_replicate", "dp_shard", "tp"}));
  EXPECT_EQ(l.dataParallelDegree(), 2); // pipeline ranks share their data
  EXPECT_EQ(l.pipelineRankOf(3), 0);
  EXPECT_EQ(l.pipelineRankOf(4), 1);
  // 6 layers + 1 + 1 over 2 stages: 4 each.
  EXPECT_EQ(l.stages.modules, (std::vector<std::vector<std::string>>{
                                  {"tok_embeddings", "layers.0", "layers.1", "layers.2"},
                                  {"layers.3", "layers.4", "layers.5", "norm", "output"}}));
  PipelineSchedule schedule = l.pipelineSchedule(8);
  EXPECT_EQ(schedule.kind, PipelineScheduleKind::OneFOneB);
  EXPECT_EQ(schedule.microbatches, 4);
  EXPECT_EQ(resolve({}, 8).axisNames().size(), 3u); // no pp axis of 1

  ParallelLayout listed =
      resolve({"--parallelism.pipeline_parallel_degree=2",
               "--parallelism.pipeline_parallel_schedule=Interleaved1F1B",
               R"(--parallelism.module_fqns_per_model_part=[["tok_embeddings", "layers.0"],
          ["layers.1", "layers.2"], ["layers.3", "layers.4"], ["layers.5", "norm", "output"]])"},
              2);
  EXPECT_EQ(listed.stages.stagesPerRank, 2);
  EXPECT_EQ(listed.stages.stagesOf(1), (std::vector<int64_t>{1, 3}));

  expectError(
      [&] {
        resolve(
            {"--parallelism.pipeline_parallel_degree=2", "--parallelism.tensor_parallel_degree=3"},
            8);
      },
      {"pipeline_parallel_degree x data_parallel_replicate_degree x "
       "tensor_parallel_degree = 2 x 1 x 3 = 6 does not divide the world of 8 ranks"});
  expectError(
      [&] {
        resolve({"--parallelism.pipeline_parallel_degree=4",
                 "--parallelism.pipeline_parallel_microbatch_size=3"},
                4)
            .pipelineSchedule(8);
      },
      {"pipeline_parallel_microbatch_size=3 must divide training.local_batch_size=8"});
  expectError([&] { resolve({"--parallelism.pipeline_parallel_degree=4"}, 4).pipelineSchedule(2); },
              {"2 microbatches are fewer than the 4 pipeline ranks"});
  expectError([&] { resolve({"--parallelism.pipeline_parallel_schedule=ZBVZeroBubble"}, 1); },
              {"pipeline_parallel_schedule", "\"GPipe\", \"1F1B\", \"Interleaved1F1B\""});
  expectError([&] { resolve({"--parallelism.module_fqns_per_model_part=[\"layers.0\"]"}, 1); },
              {"module_fqns_per_model_part", "must be a list of lists of strings"});
  expectError(
      [&] {
        resolve({"--parallelism.pipeline_parallel_degree=2",
                 "--parallelism.pipeline_parallel_layers_per_stage=3"},
                2);
      },
      {"pipeline_parallel_layers_per_stage = 3 over 6 layers", "3 stages"});
}

TEST(ParallelLayout, ExpertParallelismBorrowsFromTheShardDegree) {
  Qwen3Config moe = layoutModel();
  moe.numExperts = 8;
  moe.numExpertsPerTok = 2;
  moe.moeIntermediateSize = 64;
  moe.decoderSparseStep = 1;
  moe.numLayers = 2;
  auto resolve = [&](const Qwen3Config &model, std::vector<std::string> options, int64_t world) {
    options.insert(options.begin(), "--model.flavor=x");
    TrainConfig c = TrainConfig::load("", options);
    return ParallelLayout::resolve(c.parallelism, model, 128, world);
  };
  ParallelLayout l = resolve(moe, {"--parallelism.expert_parallel_degree=2"}, 8);
  EXPECT_EQ(l.dpShard, 8);
  EXPECT_EQ(l.shape(), (std::vector<int64_t>{1, 4, 2, 1}));
  EXPECT_EQ(l.axisNames(), (std::vector<std::string>{"dp_replicate", "dp_shard", "ep", "tp"}));
  EXPECT_EQ(l.dataParallelDegree(), 8); // ep ranks see different tokens
  EXPECT_EQ(resolve(moe, {}, 8).axisNames().size(), 3u);
  EXPECT_EQ(l.expertsSummary(), "experts over ep 2 of dp_shard");
  EXPECT_EQ(resolve(moe, {}, 8).expertsSummary(), "");
  ParallelLayout a2a = resolve(moe, {"--parallelism.expert_parallel_degree=2",
                                     "--parallelism.expert_dispatch=all_to_all",
                                     "--parallelism.expert_capacity_factor=1.25"},
                               8);
  EXPECT_EQ(a2a.expertDispatch, ExpertDispatcher::AllToAll);
  EXPECT_EQ(a2a.capacityFactor, 1.25);
  EXPECT_EQ(a2a.expertsSummary(), "experts over ep 2 of dp_shard, tokens to the experts by "
                                  "all-to-all (capacity factor 1.25)");

  expectError([&] { resolve(layoutModel(), {"--parallelism.expert_parallel_degree=2"}, 4); },
              {"expert_parallel_degree=2", "MoE model", "no expert layers"});
  expectError([&] { resolve(layoutModel(), {"--parallelism.expert_dispatch=all_to_all"}, 1); },
              {"expert_dispatch=all_to_all", "MoE model"});
  expectError([&] { resolve(moe, {"--parallelism.expert_dispatch=ragged"}, 1); },
              {"parallelism.expert_dispatch", "all_gather", "all_to_all"});
  expectError([&] { resolve(moe, {"--parallelism.expert_capacity_factor=-1"}, 1); },
              {"parallelism.expert_capacity_factor", ">= 0"});
  expectError([&] { resolve(moe, {"--parallelism.expert_parallel_degree=4"}, 6); },
              {"expert_parallel_degree=4 must divide data_parallel_shard_degree=6"});
  moe.numExperts = 6;
  expectError([&] { resolve(moe, {"--parallelism.expert_parallel_degree=4"}, 4); },
              {"expert_parallel_degree=4 must divide num_experts=6"});
  expectError([&] { resolve(moe, {"--parallelism.expert_parallel_degree=0"}, 4); },
              {"expert_parallel_degree", "got 0"});
}

TEST(ParallelLayout, DataParallelRanksTakeTheirBlockOfRows) {
  ParallelLayout l = layoutOf({"--parallelism.data_parallel_replicate_degree=2"}, 4);
  EXPECT_EQ(l.batchRows(8, 0, "t.json"), (std::pair<int64_t, int64_t>{0, 2}));
  EXPECT_EQ(l.batchRows(8, 3, "t.json"), (std::pair<int64_t, int64_t>{6, 2}));
  expectError([&] { l.batchRows(6, 0, "t.json"); },
              {"t.json", "6 rows", "data-parallel degree 4", "2 x data_parallel_shard_degree 2"});
}

/// Integers past int64 (nlohmann keeps them unsigned) are refused as the
/// numbers they are, never read wrapped negative.
TEST(TrainConfig, JsonIntegersPastInt64AreRefused) {
  expectError([] { parseJson("{\"step\": 9223372036854775808}", "state.json"); },
              {"state.json: 'step' = 9223372036854775808 is out of range"});
  expectError([] { parseJson("[1, [2, 18446744073709551615]]", "tokens.json"); },
              {"tokens.json: integer 18446744073709551615 is out of range"});
  expectError([] { parseJson("{\"a\": {\"b\": [{\"c\": 9223372036854775808}]}}", "x"); },
              {"x: 'a.b.c' = 9223372036854775808 is out of range"});
  EXPECT_EQ(parseJson("{\"step\": 9223372036854775807}", "s")["step"].get<int64_t>(),
            std::numeric_limits<int64_t>::max());
  EXPECT_EQ(parseJson("[-9223372036854775808]", "s")[0].get<int64_t>(),
            std::numeric_limits<int64_t>::min());
  // JSON built elsewhere still reaches getInt unchecked.
  JsonObject state(nlohmann::json{{"step", uint64_t(1) << 63}}, "state.json");
  expectError([&] { state.getInt("step"); },
              {"state.json: field 'step' must be below 2^63, got 9223372036854775808"});
  EXPECT_FALSE(isInt64(nlohmann::json(uint64_t(1) << 63)));
  EXPECT_TRUE(isInt64(nlohmann::json(int64_t(-1))));
}

} // namespace
