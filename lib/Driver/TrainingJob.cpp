//===- TrainingJob.cpp - A whole `kiln train` run -------------------------===//

#include "kiln/Driver/TrainingJob.h"
#include "kiln/Backend/CPU/DeviceGrid.h"
#include "kiln/Driver/BatchSource.h"
#include "kiln/Driver/CompiledStep.h"
#include "kiln/Driver/LossCurve.h"
#include "kiln/Driver/Planning.h"
#include "kiln/Driver/RankAgreement.h"
#include "kiln/Driver/TensorBoardLog.h"
#include "kiln/Driver/TrainCheckpoint.h"
#include "kiln/Driver/Training.h"
#include "kiln/Planner/MemoryPlan.h"
#include "kiln/Runtime/CpuPeak.h"
#include "kiln/Runtime/ThreadBudget.h"
#include "kiln/Support/Error.h"
#include "kiln/Support/Json.h"

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <thread>
#include <fcntl.h>
#include <unistd.h>

namespace kiln {

namespace {

namespace fs = std::filesystem;

volatile std::sig_atomic_t interrupted = 0;
/// What onInterrupt writes, prepared before it is installed (a handler may
/// only write()); empty: nothing.
std::string firstInterruptMessage, secondInterruptMessage;
/// SIGINT and SIGTERM (what schedulers send): finish the step, save, stop. A
/// second one stops at once, without saving: a rank waiting in a collective
/// for a rank that never comes (stopped, or on a lost machine) would never
/// finish its step.
extern "C" void onInterrupt(int) {
  const std::string &message = interrupted ? secondInterruptMessage : firstInterruptMessage;
  if (!message.empty()) {
    [[maybe_unused]] ssize_t written = ::write(STDERR_FILENO, message.data(), message.size());
  }
  if (interrupted)
    ::_exit(130);
  interrupted = 1;
}
/// SIGPIPE (`kiln train | head`): the reader is gone, the run is not. Point
/// stdout at /dev/null (open and dup2 are async-signal-safe) and go on.
extern "C" void onBrokenPipe(int) {
  int null = ::open("/dev/null", O_WRONLY);
  if (null >= 0) {
    ::dup2(null, STDOUT_FILENO);
    ::close(null);
  }
}

/// After a stop request, a rank that has waited this long in one collective
/// (or three slowest steps, if longer) never finishes its step: a rank it
/// waits for is stopped or lost.
constexpr double kStopGraceSeconds = 10;

/// Ends this rank at once, as a second signal would, when it waits in a
/// collective past the grace after a stop request; watches only the training
/// loop (a slow save after it may keep ranks waiting for rank 0).
class StopWatchdog {
public:
  StopWatchdog() {
    if (MpiWorld::get().size() > 1)
      thread_ = std::thread([this] { run(); });
  }
  ~StopWatchdog() { stop(); }
  /// A step took `seconds`: the grace grows with the slowest.
  void stepTook(double seconds) {
    if (seconds > slowest_.load())
      slowest_.store(seconds);
  }
  void stop() {
    done_.store(true);
    if (thread_.joinable())
      thread_.join();
  }

private:
  void run() {
    std::optional<std::chrono::steady_clock::time_point> stopSeen;
    while (!done_.load()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      if (!interrupted)
        continue;
      auto now = std::chrono::steady_clock::now();
      if (!stopSeen)
        stopSeen = now;
      double sinceStop = std::chrono::duration<double>(now - *stopSeen).count();
      double waited = std::min(MpiWorld::secondsInCollective(), sinceStop);
      double grace = std::max(kStopGraceSeconds, 3 * slowest_.load());
      if (waited > grace) {
        std::string message = fmt::format(
            "kiln train (rank {}): stopping now, without saving: waited {:.0f} s in a "
            "collective after the interrupt (a rank it waits for is stopped or lost)\n",
            MpiWorld::get().rank(), waited);
        [[maybe_unused]] ssize_t written = ::write(STDERR_FILENO, message.data(), message.size());
        ::_exit(130);
      }
    }
  }

  std::thread thread_;
  std::atomic<bool> done_{false};
  std::atomic<double> slowest_{0};
};

/// Removes what a killed save left in `folder`: the `<dir>.tmp.<pid>` and
/// `<dir>.old.<pid>` siblings saveHfCheckpoint and pruneCheckpoints rename
/// through.
void removeStaleTemporaries(const std::string &folder) {
  std::error_code ec;
  if (folder.empty() || !fs::is_directory(folder, ec))
    return;
  for (const auto &entry : fs::directory_iterator(folder, ec)) {
    std::string name = entry.path().filename().string();
    if (name.rfind("step-", 0) == 0 &&
        (name.find(".tmp.") != std::string::npos || name.find(".old.") != std::string::npos)) {
      fs::remove_all(entry.path(), ec);
      fmt::print("removed {}, left by an interrupted save\n", entry.path().string());
    }
  }
}

std::string megabytes(int64_t bytes) { return fmt::format("{:.1f} MB", bytes / 1e6); }

/// Makes sure `dir` is (or can now be) a writable directory; `option` names
/// the setting in errors.
void requireWritableDirectory(const fs::path &dir, const std::string &option) {
  std::error_code ec;
  if (fs::exists(dir, ec) && !fs::is_directory(dir, ec))
    fail("{}: '{}' exists and is not a directory", option, dir.string());
  fs::create_directories(dir, ec);
  if (ec)
    fail("{}: cannot create directory '{}': {}", option, dir.string(), ec.message());
  if (::access(dir.c_str(), W_OK) != 0)
    fail("{}: cannot write into '{}': {}", option, dir.string(), std::strerror(errno));
}

/// Checks, before any work, that `file` can be written: its directory is
/// writable and the name is not taken by a directory. Empty: not asked for.
void requireWritableFile(const std::string &file, const std::string &option) {
  if (file.empty())
    return;
  fs::path path(file);
  std::error_code ec;
  if (fs::is_directory(path, ec))
    fail("{}: '{}' is a directory, not a file", option, file);
  // An existing FIFO or device would block or swallow the output.
  if (fs::exists(path, ec) && !fs::is_regular_file(path, ec))
    fail("{}: '{}' exists and is not a regular file", option, file);
  fs::path dir = path.parent_path().empty() ? fs::path(".") : path.parent_path();
  requireWritableDirectory(dir, option);
  // The name the write creates, checked now rather than after training.
  size_t limit = maxFileNameBytes(dir.string());
  if (path.filename().string().size() > limit)
    fail("{}: the file name '{}...' is {} bytes, more than the {} this file system takes", option,
         path.filename().string().substr(0, 40), path.filename().string().size(), limit);
}

/// Every path the run will write, checked at start-up so a typo cannot
/// cost a run its results at the first save or at the end.
void checkOutputPaths(const TrainConfig &config) {
  requireWritableFile(config.metrics.jsonl, "metrics.jsonl");
  requireWritableFile(config.metrics.lossCurve, "metrics.loss_curve");
  requireWritableFile(config.data.saveValidationTokens, "data.save_validation_tokens");
  requireWritableFile(config.debug.saveGrads, "debug.save_grads");
  if (config.metrics.enableTensorboard)
    requireWritableDirectory(config.metrics.saveTbFolder, "metrics.save_tb_folder");
  if (config.checkpoint.enable || config.checkpoint.lastSaveInHf) {
    if (config.checkpoint.folder.empty())
      fail("checkpoint.folder: must name a directory when checkpoints are saved "
           "(checkpoint.enable or checkpoint.last_save_in_hf)");
    requireWritableDirectory(config.checkpoint.folder, "checkpoint.folder");
  }
}

/// metrics.jsonl, opened at its first record: a run that fails before it has
/// anything to say leaves the previous run's file alone.
class MetricsLog {
public:
  explicit MetricsLog(std::string path) : path_(std::move(path)) {}
  bool enabled() const { return !path_.empty(); }
  void write(const nlohmann::json &record) {
    if (!enabled())
      return;
    if (!out_.is_open()) {
      out_.open(path_, append_ ? std::ios::app : std::ios::trunc);
      if (!out_)
        fail("metrics.jsonl: cannot write '{}': {}", path_, std::strerror(errno));
    }
    out_ << record.dump() << "\n" << std::flush;
  }
  /// Continues the file of a run resumed after `step`: keeps its records up
  /// to `step` and returns them; the later ones (steps about to be redone,
  /// or a line a kill cut short) are dropped, and writes then append.
  std::vector<nlohmann::json> resume(int64_t step) {
    std::vector<nlohmann::json> kept;
    std::error_code ec;
    if (!enabled() || !fs::exists(path_, ec))
      return kept;
    std::istringstream in(readFile(path_));
    std::string text, line;
    while (std::getline(in, line)) {
      nlohmann::json record = jsonTooDeep(line) ? nlohmann::json()
                                                : nlohmann::json::parse(line, nullptr, false);
      if (record.is_object() && record.contains("step") &&
          isInt64(record["step"]) && record["step"].get<int64_t>() <= step) {
        text += line + "\n";
        kept.push_back(std::move(record));
      }
    }
    writeFileAtomic(path_, text);
    append_ = true;
    return kept;
  }

private:
  std::string path_;
  std::ofstream out_;
  bool append_ = false;
};

void printPlan(Trainer &trainer) {
  MemoryPlan plan = planMemory(trainer.module().lookupSymbol<mlir::func::FuncOp>("train_step"));
  const Qwen3Config &m = trainer.model();
  fmt::print("plan: {} parameters{} ({} layers, hidden {}, vocab {}), {:.4g} FLOPs/token\n",
             m.parameterCount(),
             m.isMoe() ? fmt::format(", {} active per token", m.activeParameterCount()) : "",
             m.numLayers, m.hiddenSize, m.vocabSize, trainer.flopsPerToken());
  fmt::print("  memory per step{} (f32, exact for the CPU executor): parameters {}, gradients "
             "{}, optimizer state {}, activations saved for backward {}; peak of all "
             "intermediates {}, peak total {}\n",
             trainer.layout().worldSize() > 1 ? " per rank" : "",
             megabytes(plan.parameterBytes), megabytes(plan.gradientBytes),
             megabytes(plan.stateBytes), megabytes(plan.savedActivationBytes),
             megabytes(plan.peakIntermediateBytes), megabytes(plan.peakBytes));
  if (trainer.layout().worldSize() > 1) {
    MemoryPlan one = trainer.singleRankPlan();
    fmt::print("  one rank holding the whole step would need: parameters {}, gradients {}, "
               "optimizer state {}, peak total {} (per rank above: {:.2f}x of it)\n",
               megabytes(one.parameterBytes), megabytes(one.gradientBytes),
               megabytes(one.stateBytes), megabytes(one.peakBytes),
               double(plan.peakBytes) / double(one.peakBytes));
  }
  // The first call measures the machine: after the data are checked.
  double peak = trainer.peakFlops();
  fmt::print("  MFU is against this CPU's sgemm peak, {:.1f} GFLOP/s ({})\n", peak / 1e9,
             cpuRatesSource());
}

/// `kiln plan`'s plan of the Trainer's own per-rank step on the cpu target
/// (this machine, measured), shared by the ranks on it.
StepPlan planThisRun(Trainer &trainer) {
  const MpiWorld &world = MpiWorld::get();
  int64_t nodes = std::max(1, world.size() / world.localSize());
  TargetProfile target = cpuTargetForRanks(world.localSize());
  if (trainer.layout().pp > 1) {
    // The pipeline's stage programs and updates, as kiln plan plans them.
    TrainConfig config = trainer.config();
    config.parallelism.worldSize = trainer.layout().worldSize();
    return planTrainingRun(config, target, nodes);
  }
  return planStep(trainer.module().lookupSymbol<mlir::func::FuncOp>("train_step"), target,
                  planSetting(trainer.config(), trainer.model(), trainer.layout(), nodes));
}

/// The end-of-run comparison: the planned step time against the fastest
/// measured step (the least disturbed by other load on the machine) and
/// the median, and the planned live-tensor peak against the executor's.
void printPlannedVsMeasured(const StepPlan &plan, std::vector<double> seconds,
                            int64_t measuredPeak) {
  if (seconds.empty())
    return;
  std::sort(seconds.begin(), seconds.end());
  double fastest = seconds.front(), median = seconds[seconds.size() / 2];
  auto error = [](double planned, double measured) {
    return fmt::format("{:+.1f}%", 100 * (planned / measured - 1));
  };
  // A pipelined step's peak spans several programs and the tensors held
  // between them: the executor measures no one peak of it.
  std::string memory =
      plan.pipeline
          ? fmt::format("{} planned for pp rank {}, not measured under pipeline parallelism",
                        megabytes(plan.memory.peakBytes), plan.pipeline->largestRank)
          : fmt::format("{} vs {} ({})", megabytes(plan.memory.peakBytes), megabytes(measuredPeak),
                        error(double(plan.memory.peakBytes), double(measuredPeak)));
  fmt::print("planned vs measured: step {:.4f} s vs {:.4f} s ({}; the fastest of {} step{}, "
             "median {:.4f} s), peak memory {}\n",
             plan.stepSeconds, fastest, error(plan.stepSeconds, fastest), seconds.size(),
             seconds.size() == 1 ? "" : "s", median, memory);
}

void printStep(const StepMetrics &m, double peakFlops) {
  std::string metrics;
  for (const auto &[name, value] : m.metrics)
    metrics += fmt::format("  {} {:.6f}", name, value);
  fmt::print("step {:>5}  loss {:.6f}{}  grad_norm {:.4f}  lr {:.3e}  tok/s {:.0f}  "
             "tflops {:.4f}  mfu {}  mem_live_peak {}  rss_peak {}  ({:.2f} s)\n",
             m.step, m.loss, metrics, m.gradNorm, m.lr, m.tokensPerSecond, m.tflops,
             describeMfu(m.mfu, peakFlops),
             m.memLivePeakBytes < 0 ? "-" : megabytes(m.memLivePeakBytes),
             megabytes(m.rssPeakBytes), m.seconds);
  std::fflush(stdout);
}

/// A step's scalars under torchtitan's TensorBoard tags (components/
/// metrics.py) where it has one, so its dashboards carry over: the executor's
/// live-tensor peak as the allocator's active peak, the process's peak RSS
/// as its reserved peak. Metric outputs (a MoE model's aux_loss) keep their
/// own names, as in metrics.jsonl.
std::vector<std::pair<std::string, double>> stepScalars(const StepMetrics &m,
                                                        int64_t tokensPerStep) {
  constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
  std::vector<std::pair<std::string, double>> scalars = {
      {"loss_metrics/global_avg_loss", m.loss},
      {"grad_norm", m.gradNorm},
      {"lr", m.lr},
      {"ntokens_seen", double(m.step) * double(tokensPerStep)},
      {"throughput(tps)", m.tokensPerSecond},
      {"tflops", m.tflops},
      {"mfu(%)", 100.0 * m.mfu},
      {"time_metrics/end_to_end(s)", m.seconds},
      {"memory/max_reserved(GiB)", double(m.rssPeakBytes) / kGiB}};
  if (m.memLivePeakBytes >= 0) // compiled mode does not count live tensors
    scalars.push_back({"memory/max_active(GiB)", double(m.memLivePeakBytes) / kGiB});
  for (const auto &[name, value] : m.metrics)
    scalars.push_back({name, value});
  return scalars;
}

/// metrics.enable_tensorboard's event file, on the leader: torchtitan's
/// <save_tb_folder>/<YYYYmmdd-HHMM>/.
std::unique_ptr<TensorBoardLog> openTensorBoard(const TrainConfig &config, bool leader) {
  if (!config.metrics.enableTensorboard || !leader)
    return nullptr;
  std::time_t now = std::time(nullptr);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M", std::localtime(&now));
  auto log = std::make_unique<TensorBoardLog>(
      (fs::path(config.metrics.saveTbFolder) / stamp).string());
  fmt::print("tensorboard: {}\n", log->path());
  return log;
}

nlohmann::json stepJson(const StepMetrics &m) {
  nlohmann::json record = {{"step", m.step},
          {"loss", m.loss},
          {"grad_norm", m.gradNorm},
          {"lr", m.lr},
          {"seconds", m.seconds},
          {"tokens_per_s", m.tokensPerSecond},
          {"tflops", m.tflops},
          {"mfu", m.mfu},
          {"mem_live_peak_bytes", m.memLivePeakBytes < 0 ? nlohmann::json(nullptr)
                                                         : nlohmann::json(m.memLivePeakBytes)},
          {"rss_peak_bytes", m.rssPeakBytes},
          {"collective_s", m.collectiveSeconds},
          {"bytes_sent", m.bytesSent}};
  for (const auto &[name, value] : m.metrics)
    record[name] = value;
  return record;
}

/// A one-line bar on stderr, redrawn in place; only on a terminal.
class ProgressBar {
public:
  /// `first`: the step a resumed run starts after (its rate counts from there).
  ProgressBar(int64_t total, int64_t first)
      : total_(total), first_(first), enabled_(isatty(STDERR_FILENO)) {}
  void update(int64_t done, double loss, double seconds) {
    if (!enabled_)
      return;
    constexpr int kWidth = 30;
    int filled = int(kWidth * std::min(done, total_) / total_);
    double eta = done > first_ ? seconds / double(done - first_) * double(total_ - done) : 0;
    fmt::print(stderr, "\r[{}{}] {}/{} steps  loss {:.4f}  eta {:.0f} s ",
               std::string(filled, '#'), std::string(kWidth - filled, '.'), done, total_, loss,
               eta);
    std::fflush(stderr);
  }
  /// Moves off the bar's line before other output.
  void clear() {
    if (enabled_)
      fmt::print(stderr, "\r{}\r", std::string(80, ' '));
  }

private:
  int64_t total_, first_;
  bool enabled_;
};

/// ", data epoch 0 batch 5 of 120" for a corpus position, "" for a fixed batch.
std::string describePosition(const nlohmann::json &position) {
  if (!position.contains("epoch"))
    return "";
  return fmt::format(", data epoch {} batch {} of {}", position["epoch"].dump(),
                     position["batch_in_epoch"].dump(), position["batches_per_epoch"].dump());
}

} // namespace

int runTrainingJob(const TrainConfig &config) {
  checkOutputPaths(config);
  // Rank 0 saves; it holds the folder before anything there is read.
  std::optional<CheckpointFolderLock> folderLock;
  if ((config.checkpoint.enable || config.checkpoint.lastSaveInHf) && MpiWorld::get().rank() == 0)
    folderLock.emplace(config.checkpoint.folder);
  // A resumable checkpoint in the folder, checked against this run's
  // settings before anything is loaded (torchtitan: with checkpoint.enable,
  // the folder's checkpoint wins over checkpoint.initial_load_path).
  std::optional<std::string> resumeDir;
  TrainState resumed;
  if (config.checkpoint.enable && (resumeDir = findResumeCheckpoint(config.checkpoint))) {
    resumed = TrainState::read(*resumeDir);
    checkResumable(resumed, *resumeDir, config);
  }
  // The Trainer first: it refuses a model whose step cannot fit in memory
  // right after capture, before any data is read or tokenized.
  Trainer trainer(config, resumeDir.value_or(""));
  if (resumeDir)
    restoreTrainCheckpoint(trainer, *resumeDir, resumed);
  // Rank 0 prints and writes files; the other ranks compute alongside.
  bool leader = trainer.isLeader();
  if (!leader && !std::freopen("/dev/null", "w", stdout))
    fail("cannot silence the output of rank {}", MpiWorld::get().rank());
  BatchSource data(config, trainer.globalBatchSize(), leader,
                   [&] { trainer.anyRank(false); });
  // The same settings may still name other files on another machine: the
  // ranks compare the tokens before the first step reads them.
  RunSettings dataSettings;
  nlohmann::json position = data.position(0);
  position.erase("next_batch");
  dataSettings.add("training data", position);
  dataSettings.add("training data.validation_batches", int64_t(data.validation().size()));
  requireRanksAgree(dataSettings, "the training data");
  if (resumeDir)
    data.checkPosition(resumed.data, (fs::path(*resumeDir) / kTrainStateFile).string() +
                                         ": field 'data'");
  const int64_t steps = config.training.steps, first = resumed.step;
  const Qwen3Config &model = trainer.model();
  fmt::print("kiln train: {} ({} parameters), batch {} x seq {}{}, {} steps\n", model.name,
             model.parameterCount(), trainer.config().training.localBatchSize,
             trainer.config().training.seqLen,
             trainer.microbatches() > 1
                 ? fmt::format(" (global batch {}: {} microbatches accumulated per step)",
                               trainer.globalBatchSize(), trainer.microbatches())
                 : "",
             steps);
  if (leader && config.lrScheduler.warmupSteps > steps)
    fmt::print(stderr, "warning: lr_scheduler.warmup_steps = {} is more than training.steps = {}: "
                       "the learning rate warms up over the whole run, reaching optimizer.lr "
                       "at its last step\n",
               config.lrScheduler.warmupSteps, steps);
  if (trainer.compiled() && !config.compile.artifact.empty()) {
    auto [lower, llvm] = trainer.compileSeconds();
    fmt::print("compile: the step linked from {} (kiln compile --target cpu) in {:.1f} s, "
               "nothing compiled, apart from the step times; {} loop nests on up to {} "
               "threads\n",
               config.compile.artifact, lower + llvm,
               trainer.compiledStep()->function->threadedLoopNests(), ThreadBudget::current());
  } else if (trainer.compiled()) {
    auto [lower, llvm] = trainer.compileSeconds();
    fmt::print("compile: the step compiled for the CPU in {:.1f} s (lowering {:.1f} s, LLVM "
               "{:.1f} s), apart from the step times; {} loop nests on up to {} threads\n",
               lower + llvm, lower, llvm, trainer.compiledStep()->function->threadedLoopNests(),
               ThreadBudget::current());
  }
  if (resumeDir) {
    fmt::print("resumed from checkpoint {} at step {} (weights, optimizer state, learning-rate "
               "schedule{}){}\n",
               *resumeDir, first, describePosition(resumed.data),
               config.checkpoint.initialLoadPath.empty()
                   ? ""
                   : "; checkpoint.initial_load_path is not read");
    const nlohmann::json &was = resumed.config["training"]["steps"];
    if (was != nlohmann::json(steps))
      fmt::print(stderr, "warning: training.steps is {}, the checkpoint's run had {}: the "
                         "learning-rate schedule follows the new total\n",
                 steps, briefJson(was));
    if (first >= steps)
      fmt::print("step {} is already at training.steps = {}: nothing left to train (raise "
                 "training.steps to continue, or move {} away to start over)\n",
                 first, steps, config.checkpoint.folder);
  } else if (config.checkpoint.enable) {
    fmt::print("checkpoint: no resumable checkpoint in {}; starting from {}\n",
               config.checkpoint.folder,
               config.checkpoint.initialLoadPath.empty() ? "random weights"
                                                         : config.checkpoint.initialLoadPath);
  }
  const ParallelLayout &layout = trainer.layout();
  std::string stages; // each stage's modules
  for (const std::vector<std::string> &modules : layout.stages.modules)
    stages += fmt::format("{}{}", stages.empty() ? "" : " | ", fmt::join(modules, " "));
  if (layout.pp > 1)
    fmt::print("parallelism: {} ranks, pp {} x dp_replicate {} x dp_shard {}{} x tp {}: {} stages "
               "({}), {} microbatches of {} rows under {}; global batch {}\n",
               layout.worldSize(), layout.pp, layout.dpReplicate, layout.dpShard,
               layout.cpSummary(), layout.tp, layout.stages.numStages(), stages,
               trainer.config().training.localBatchSize / layout.microbatchSize,
               layout.microbatchSize, wordOf(layout.schedule), trainer.globalBatchSize());
  else if (layout.worldSize() > 1)
    fmt::print("parallelism: {} ranks, dp_replicate {} x dp_shard {}{} x tp {}{} (FSDP2 over "
               "dp_shard{}, reshard after forward: {}); global batch {}\n",
               layout.worldSize(), layout.dpReplicate, layout.dpShard, layout.cpSummary(),
               layout.tp, layout.expertsSummary().empty() ? "" : ", " + layout.expertsSummary(),
               layout.cp > 1 ? " and cp" : "", wordOf(layout.reshardAfterForward),
               trainer.globalBatchSize());
  // The plan of this run on this machine, compared with its steps at the
  // end (a pipelined run's: its stage programs and schedule).
  if (layout.pp == 1)
    printPlan(trainer);
  std::optional<StepPlan> cpuPlan = planThisRun(trainer);
  fmt::print("{}", formatPlan(*cpuPlan));

  if (!config.debug.saveGrads.empty()) {
    TensorMap grads = trainer.gradients(data.train(first));
    if (leader)
      writeSafeTensors(config.debug.saveGrads, grads);
    fmt::print("  wrote step-{} gradients to {}\n", first + 1, config.debug.saveGrads);
  }
  MetricsLog jsonl(leader ? config.metrics.jsonl : "");
  std::unique_ptr<TensorBoardLog> tensorboard = openTensorBoard(config, leader);
  const int64_t tokensPerStep = trainer.globalBatchSize() * trainer.config().training.seqLen;
  // A logged step: printed, and written to metrics.jsonl and TensorBoard.
  auto logStep = [&](const StepMetrics &m) {
    printStep(m, trainer.peakFlops());
    jsonl.write(stepJson(m));
    if (tensorboard)
      tensorboard->scalars(m.step, stepScalars(m, tokensPerStep));
  };
  LossPoints trainCurve, validationCurve;
  if (resumeDir) // the curves and the file go on from the saved run's records
    for (const nlohmann::json &record : jsonl.resume(first)) {
      int64_t step = record["step"].get<int64_t>();
      if (record.contains("loss") && record["loss"].is_number())
        trainCurve.push_back({step, record["loss"].get<double>()});
      if (record.contains("validation_loss") && record["validation_loss"].is_number())
        validationCurve.push_back({step, record["validation_loss"].get<double>()});
    }
  auto validate = [&](int64_t step) {
    if (data.validation().empty())
      return;
    // Only the leader reads the resumed records, so the ranks agree on a
    // step already validated (evaluation runs collectives on every rank).
    bool already = !validationCurve.empty() && validationCurve.back().first == step;
    if (trainer.anyRank(already))
      return;
    double loss = trainer.evaluate(data.validation());
    validationCurve.push_back({step, loss});
    fmt::print("step {:>5}  validation loss {:.6f} over {} held-out batches\n", step, loss,
               data.validation().size());
    jsonl.write({{"step", step}, {"validation_loss", loss}});
    if (tensorboard)
      tensorboard->scalars(step, {{"validation_metrics/loss", loss}});
    if (!std::isfinite(loss))
      fail("step {}: the validation loss is {}: the weights are not finite", step, loss);
  };
  // `full`: the whole training state (resumable), else the model alone.
  auto save = [&](int64_t step, bool full) {
    std::string dir =
        (std::filesystem::path(config.checkpoint.folder) / fmt::format("step-{}", step))
            .string();
    std::error_code ec;
    if (leader && fs::exists(dir, ec))
      fmt::print(stderr, "warning: replacing {}, a checkpoint this run did not write\n", dir);
    TrainState state;
    if (full) {
      state.step = step;
      state.globalBatchSize = trainer.globalBatchSize();
      state.seqLen = trainer.config().training.seqLen;
      state.data = data.position(step);
      state.config = trainer.config().toJson();
    }
    saveTrainCheckpoint(trainer, dir, full ? &state : nullptr, config.checkpoint.maxShardBytes,
                        config.debug.killDuringSave == step);
    if (full)
      fmt::print("saved checkpoint {} (model, optimizer state, data position)\n", dir);
    else
      fmt::print("saved Hugging Face checkpoint {}\n", dir);
    // Only now that the new checkpoint is complete.
    if (leader && config.checkpoint.enable)
      pruneCheckpoints(config.checkpoint.folder, config.checkpoint.keepLatestK);
  };

  if (leader)
    removeStaleTemporaries(config.checkpoint.folder);
  interrupted = 0;
  firstInterruptMessage = leader ? "kiln train: interrupted: stopping after this step and saving "
                                   "(interrupt again to stop at once, without saving)\n"
                                 : "";
  secondInterruptMessage = fmt::format("kiln train{}: interrupted again: stopping now, without "
                                       "saving\n",
                                       MpiWorld::get().size() > 1
                                           ? fmt::format(" (rank {})", MpiWorld::get().rank())
                                           : "");
  auto previous = std::signal(SIGINT, onInterrupt);
  auto previousTerm = std::signal(SIGTERM, onInterrupt);
  auto previousPipe = std::signal(SIGPIPE, onBrokenPipe);
  ProgressBar bar(steps, first);
  auto start = std::chrono::steady_clock::now();
  // A resumed run's starting state is saved already.
  int64_t done = first, lastSaved = resumeDir ? first : -1;
  if (!resumeDir) // a resumed run's earlier validations are in its records
    validate(0);
  // Ranks agree on a Ctrl-C, so every one stops after the same step.
  StepMetrics last;
  int64_t lastLogged = first;
  // This process's steps after its first (which also faults in buffers).
  std::vector<double> measuredSeconds;
  int64_t measuredPeak = 0;
  StopWatchdog watchdog;
  for (int64_t s = first + 1; s <= steps && !trainer.anyRank(interrupted); ++s) {
    StepMetrics m = trainer.step(data.train(s - 1));
    watchdog.stepTook(m.seconds);
    done = s;
    if (s > first + 1 || steps == first + 1)
      measuredSeconds.push_back(m.seconds);
    measuredPeak = std::max(measuredPeak, m.memLivePeakBytes);
    trainCurve.push_back({s, m.loss});
    bar.clear();
    bool finite = std::isfinite(m.loss) && std::isfinite(m.gradNorm);
    if (s == 1 || s == steps || s % config.metrics.logFreq == 0 || !finite) {
      logStep(m);
      lastLogged = s;
    }
    last = m;
    // A non-finite loss or gradient has already reached the weights through
    // this step's update: stop before anything saves them.
    if (!finite)
      fail("step {}: loss {} and grad_norm {}: training diverged or the weights or data are "
           "not finite; stopping without saving (lower optimizer.lr, check the inputs)",
           s, m.loss, m.gradNorm);
    if (config.metrics.evalFreq > 0 && s % config.metrics.evalFreq == 0)
      validate(s);
    // The last step's save comes after the loop (it may hold the model only).
    if (config.checkpoint.enable && s % config.checkpoint.interval == 0 && s != steps) {
      save(s, true);
      lastSaved = s;
    }
    std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
    bar.update(s, m.loss, elapsed.count());
  }
  watchdog.stop();
  bar.clear();
  // A run cut short (a signal on any rank) always logs the step it stopped
  // after.
  if (done < steps && lastLogged != done) {
    logStep(last);
  }
  if (interrupted)
    fmt::print("interrupted: stopping after step {}\n", done);
  // Held-out loss of the final weights (the weights after `done` updates).
  validate(done);
  // torchtitan: the end of training saves the model alone under
  // checkpoint.last_save_model_only; a run cut short saves all it needs to go on.
  if ((config.checkpoint.enable || config.checkpoint.lastSaveInHf) && lastSaved != done &&
      done > 0)
    save(done, config.checkpoint.enable &&
                   !(done >= steps && config.checkpoint.lastSaveModelOnly));
  std::signal(SIGINT, previous);
  std::signal(SIGTERM, previousTerm);
  std::signal(SIGPIPE, previousPipe);
  // After the last step's validation and save, whose lines follow its own.
  if (cpuPlan)
    printPlannedVsMeasured(*cpuPlan, measuredSeconds, measuredPeak);
  if (const CompiledStep *step = trainer.compiledStep(); step && done > first + 1) {
    const StepArena &arena = step->function->arena();
    fmt::print("compiled step: its temporaries in one arena of {} laid out from its first "
               "run (their live peak {}); its last step took {} buffers from the system\n",
               megabytes(arena.arenaBytes()), megabytes(arena.lastRun().peakLiveBytes),
               arena.lastRun().systemAllocations);
  }

  if (leader && !config.metrics.lossCurve.empty()) {
    writeFileAtomic(config.metrics.lossCurve,
                    lossCurveSvg(trainCurve, validationCurve,
                                 fmt::format("{}: loss over {} steps", model.name, done)));
    fmt::print("loss curve: {}\n", config.metrics.lossCurve);
  }
  if (jsonl.enabled())
    fmt::print("metrics: {}\n", config.metrics.jsonl);
  return interrupted ? 130 : 0;
}

} // namespace kiln
