//===- TrainCheckpoint.h - Resumable training checkpoints -------*- C++ -*-===//
//
// torchtitan's checkpoint semantics on Hugging Face directories. A full
// checkpoint <checkpoint.folder>/step-N is the model as saveHfCheckpoint
// writes it (config.json + safetensors, so `kiln eval` reads it) plus
//   optimizer.safetensors  every optimizer-state tensor, whole (unsharded), by
//                          state name: a checkpoint of N ranks resumes on M
//   train_state.json       the update count, the data position and the run's
//                          configuration, to check a resumed run continues it
// all built in a temporary directory and renamed into place at once, so a
// step-N directory is absent or complete whenever the process dies.
// A model-only checkpoint (checkpoint.last_save_model_only) lacks the last
// two files and is never resumed from.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_DRIVER_TRAINCHECKPOINT_H
#define KILN_DRIVER_TRAINCHECKPOINT_H

#include "kiln/Driver/TrainConfig.h"
#include "kiln/Support/FileLock.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <string>

namespace kiln {

class Trainer;

inline constexpr const char *kTrainStateFile = "train_state.json";
inline constexpr const char *kOptimizerStateFile = "optimizer.safetensors";

/// What train_state.json holds.
struct TrainState {
  int64_t step = 0;            ///< optimizer updates done (the LR schedule's position)
  int64_t globalBatchSize = 0; ///< rows per step over every data-parallel rank
  int64_t seqLen = 0;
  nlohmann::json data;         ///< BatchSource::position(step)
  nlohmann::json config;       ///< the run's TrainConfig::toJson()

  nlohmann::json toJson() const;
  /// Reads `dir`/train_state.json; throws kiln::Error naming the file and
  /// the field if it is malformed.
  static TrainState read(const std::string &dir);
};

/// `folder`'s step-N directories by N (temporaries and other names skipped).
std::map<int64_t, std::string> checkpointSteps(const std::string &folder);

/// The checkpoint a run with checkpoint.enable resumes from: step-<load_step>,
/// or for load_step -1 the newest step-N holding train_state.json (none:
/// nullopt, a fresh start). Throws kiln::Error naming checkpoint.load_step if
/// that step is absent or holds only a model.
std::optional<std::string> findResumeCheckpoint(const TrainConfig::Checkpoint &checkpoint);

/// Throws kiln::Error naming the first setting of `now` that would not
/// continue the checkpoint's run (`saved`, read from `dir`): the model's
/// config.json fields, the optimizer, the LR schedule and the data order.
/// The parallel layout may differ. Checked before the Trainer loads `dir`.
void checkResumable(const TrainState &saved, const std::string &dir, const TrainConfig &now);

/// Writes the checkpoint of `trainer`'s current state to `dir`, the full
/// state with `state`, the model only without. Every rank calls it (the
/// state is gathered); rank 0 writes. `killAfterOptimizer` is a crash test:
/// SIGKILL this process once the optimizer state is written, before
/// train_state.json and before the directory is renamed into place.
void saveTrainCheckpoint(const Trainer &trainer, const std::string &dir,
                         const TrainState *state, int64_t maxShardBytes,
                         bool killAfterOptimizer = false);

/// Restores the optimizer state and update count of the full checkpoint
/// `dir` into `trainer`, whose weights were loaded from `dir`, after
/// checking the sequence length and the global batch (as checkResumable).
void restoreTrainCheckpoint(Trainer &trainer, const std::string &dir, const TrainState &state);

/// Deletes all but the newest `keep` step-N directories of `folder` (keep 0:
/// none deleted). Each is renamed aside before it is removed, so a kill
/// never leaves a half-deleted checkpoint under a step-N name.
void pruneCheckpoints(const std::string &folder, int64_t keep);

/// One run's hold on its checkpoint folder: an exclusive flock on
/// `<folder>/.kiln-train.lock`, with the holder's pid, host and start time
/// written in it, for as long as the object lives (the kernel releases it
/// however the process ends, SIGKILL included). A second run on the folder
/// is refused naming the holder, before it reads or cleans anything there.
class CheckpointFolderLock {
public:
  /// Throws kiln::Error when another live process holds the folder.
  explicit CheckpointFolderLock(const std::string &folder);

  static constexpr const char *kFileName = ".kiln-train.lock";

private:
  FileLock lock_;
};

} // namespace kiln

#endif // KILN_DRIVER_TRAINCHECKPOINT_H
