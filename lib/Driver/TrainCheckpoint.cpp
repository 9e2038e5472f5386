//===- TrainCheckpoint.cpp - Resumable training checkpoints ---------------===//

#include "kiln/Driver/TrainCheckpoint.h"
#include "kiln/Driver/Training.h"
#include "kiln/Runtime/HfCheckpoint.h"
#include "kiln/Runtime/SafeTensors.h"
#include "kiln/Support/Error.h"
#include "kiln/Support/Json.h"

#include <fmt/core.h>

#include <csignal>
#include <filesystem>
#include <set>
#include <unistd.h>

namespace kiln {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

/// Bumped when the layout changes, so an old Kiln's checkpoint is refused by
/// name instead of misread.
constexpr int64_t kTrainStateVersion = 1;

/// Settings that steer training whatever the parallel layout: a run resumed
/// with another value would not continue the saved one. (training.steps may
/// change, to extend a run; the batch and sequence length are checked on the
/// Trainer's resolved values.)
constexpr std::pair<const char *, const char *> kMustMatch[] = {
    {"training", "max_norm"},         {"optimizer", "lr"},
    {"optimizer", "betas"},           {"optimizer", "eps"},
    {"optimizer", "weight_decay"},    {"lr_scheduler", "warmup_steps"},
    {"lr_scheduler", "decay_ratio"},  {"lr_scheduler", "decay_type"},
    {"lr_scheduler", "min_lr_factor"}, {"data", "source"},
    {"data", "seed"},                 {"data", "validation_fraction"},
};

std::string statePath(const std::string &dir) { return (fs::path(dir) / kTrainStateFile).string(); }

bool isResumable(const std::string &dir) {
  std::error_code ec;
  return fs::exists(statePath(dir), ec);
}

/// The first config.json field in which `a` and `b` differ, if any.
std::optional<std::string> firstDifference(const json &a, const json &b) {
  std::set<std::string> keys;
  for (const json *doc : {&a, &b})
    for (const auto &[key, value] : doc->items())
      keys.insert(key);
  for (const std::string &key : keys)
    if (!a.contains(key) || !b.contains(key) || a[key] != b[key])
      return key;
  return std::nullopt;
}

std::string valueText(const json &doc, const std::string &key) {
  return doc.contains(key) ? briefJson(doc[key]) : "absent";
}

[[noreturn]] void refuse(const std::string &dir, const std::string &what) {
  fail("checkpoint: cannot resume from {}: {}; restore the setting, or start a new run in "
       "another checkpoint.folder",
       dir, what);
}

} // namespace

json TrainState::toJson() const {
  return {{"version", kTrainStateVersion}, {"step", step},
          {"global_batch_size", globalBatchSize}, {"seq_len", seqLen},
          {"data", data}, {"config", config}};
}

TrainState TrainState::read(const std::string &dir) {
  std::string path = statePath(dir);
  JsonObject doc = JsonObject::parse(readFile(path), path);
  if (int64_t version = doc.getInt("version"); version != kTrainStateVersion)
    fail("{}: field 'version' is {}; this Kiln reads version {}", path, version,
         kTrainStateVersion);
  TrainState s;
  s.step = doc.getInt("step");
  s.globalBatchSize = doc.getInt("global_batch_size");
  s.seqLen = doc.getInt("seq_len");
  if (s.step < 0)
    fail("{}: field 'step' must be >= 0, got {}", path, s.step);
  if (s.globalBatchSize <= 0 || s.seqLen <= 0)
    fail("{}: fields 'global_batch_size' and 'seq_len' must be > 0, got {} and {}", path,
         s.globalBatchSize, s.seqLen);
  s.data = doc.get("data");
  s.config = doc.get("config");
  if (!s.data.is_object() || !s.config.is_object())
    fail("{}: fields 'data' and 'config' must be objects", path);
  int64_t next = JsonObject(s.data, path + ": field 'data'").getInt("next_batch");
  if (next != s.step)
    fail("{}: field 'data.next_batch' is {}, but {} steps were trained", path, next, s.step);
  return s;
}

std::map<int64_t, std::string> checkpointSteps(const std::string &folder) {
  std::map<int64_t, std::string> steps;
  std::error_code ec;
  if (folder.empty() || !fs::is_directory(folder, ec))
    return steps;
  for (const auto &entry : fs::directory_iterator(folder, ec)) {
    std::string name = entry.path().filename().string();
    if (name.rfind("step-", 0) != 0 || name.size() == 5 || name.size() > 5 + 18 ||
        name.find_first_not_of("0123456789", 5) != std::string::npos ||
        !entry.is_directory(ec))
      continue; // temporaries (step-N.tmp.PID) and anything else
    steps.emplace(std::stoll(name.substr(5)), entry.path().string());
  }
  return steps;
}

std::optional<std::string> findResumeCheckpoint(const TrainConfig::Checkpoint &c) {
  std::map<int64_t, std::string> steps = checkpointSteps(c.folder);
  if (c.loadStep >= 0) {
    auto it = steps.find(c.loadStep);
    if (it == steps.end())
      fail("checkpoint.load_step: {} holds no step-{} checkpoint", c.folder, c.loadStep);
    if (!isResumable(it->second))
      fail("checkpoint.load_step: {} holds only a model (no {}), not a training state to "
           "resume",
           it->second, kTrainStateFile);
    return it->second;
  }
  for (auto it = steps.rbegin(); it != steps.rend(); ++it)
    if (isResumable(it->second))
      return it->second;
  return std::nullopt;
}

void checkResumable(const TrainState &saved, const std::string &dir, const TrainConfig &now) {
  std::string path = statePath(dir);
  // The folder is searched by directory name; a renamed or copied step-N
  // holding another step's state would resume there and then be replaced.
  std::string name = fs::path(dir).filename().string();
  if (name != fmt::format("step-{}", saved.step))
    fail("{}: field 'step' is {}, but the checkpoint's directory is {}: a step-N directory must "
         "hold step N's state",
         path, saved.step, name);
  json nowConfig = now.toJson();
  for (auto [section, key] : kMustMatch) {
    const json &was = saved.config.contains(section) && saved.config[section].is_object()
                          ? saved.config[section]
                          : json::object();
    if (!was.contains(key))
      fail("{}: field 'config.{}.{}' is missing", path, section, key);
    if (was[key] != nowConfig[section][key])
      refuse(dir, fmt::format("{}.{} is {} in this run, {} in the checkpoint's", section, key,
                         briefJson(nowConfig[section][key]), briefJson(was[key])));
  }
  std::string configPath = (fs::path(dir) / "config.json").string();
  json wasModel = parseJson(readFile(configPath), configPath);
  json nowModel = parseJson(now.model.resolve().toHfConfigJson(), "the run's model");
  if (!wasModel.is_object())
    fail("{}: expected a JSON object", configPath);
  if (auto key = firstDifference(nowModel, wasModel))
    refuse(dir, fmt::format("the model's config.json field '{}' is {} in this run, {} in {}", *key,
                       valueText(nowModel, *key), valueText(wasModel, *key), configPath));
}

void saveTrainCheckpoint(const Trainer &trainer, const std::string &dir,
                         const TrainState *state, int64_t maxShardBytes,
                         bool killAfterOptimizer) {
  TensorMap params = trainer.parameters(); // every rank takes part in the gathers
  TensorMap optimizer = state ? trainer.optimizerState() : TensorMap();
  if (!trainer.isLeader())
    return;
  saveHfCheckpoint(dir, trainer.model().toHfConfigJson(), params, maxShardBytes,
                   [&](const std::string &tmp) {
                     if (state)
                       writeSafeTensors((fs::path(tmp) / kOptimizerStateFile).string(),
                                        optimizer);
                     if (killAfterOptimizer)
                       ::kill(::getpid(), SIGKILL);
                     // Last: its presence marks the directory resumable.
                     if (state)
                       writeFileAtomic(statePath(tmp), state->toJson().dump(2) + "\n");
                   });
}

void restoreTrainCheckpoint(Trainer &trainer, const std::string &dir, const TrainState &state) {
  // The Trainer has resolved them (a token file's shape, the layout).
  int64_t seqLen = trainer.config().training.seqLen, batch = trainer.globalBatchSize();
  if (state.seqLen != seqLen)
    refuse(dir, fmt::format("training.seq_len is {} in this run, {} in the checkpoint's", seqLen,
                            state.seqLen));
  if (state.globalBatchSize != batch)
    refuse(dir, fmt::format("the global batch (training.local_batch_size x data-parallel "
                            "degree x microbatches, training.global_batch_size) is {} rows in "
                            "this run, {} in the checkpoint's",
                            batch, state.globalBatchSize));
  std::shared_ptr<SafeTensorsFile> file =
      SafeTensorsFile::open((fs::path(dir) / kOptimizerStateFile).string());
  trainer.restoreOptimizerState(*file, state.step);
}

void pruneCheckpoints(const std::string &folder, int64_t keep) {
  if (keep <= 0)
    return;
  std::map<int64_t, std::string> steps = checkpointSteps(folder);
  int64_t excess = int64_t(steps.size()) - keep;
  for (auto it = steps.begin(); excess > 0; ++it, --excess) {
    // Renamed aside first (removeStaleTemporaries clears what a kill leaves).
    std::string aside = it->second + fmt::format(".old.{}", ::getpid());
    std::error_code ec;
    fs::rename(it->second, aside, ec);
    if (!ec)
      fs::remove_all(aside, ec);
    if (ec)
      fmt::print(stderr, "warning: cannot remove {} (checkpoint.keep_latest_k = {}): {}\n",
                 it->second, keep, ec.message());
    else
      fmt::print("removed {} (checkpoint.keep_latest_k = {})\n", it->second, keep);
  }
}

CheckpointFolderLock::CheckpointFolderLock(const std::string &folder)
    : lock_((fs::path(folder) / kFileName).string(), "checkpoint.folder") {
  if (!lock_.acquired())
    fail("checkpoint.folder '{}' is in use by another kiln train ({}): two runs on one "
         "folder would mix their checkpoints; wait for it, or give this run its own folder",
         folder, lock_.holder());
}

} // namespace kiln
