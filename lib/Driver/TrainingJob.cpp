//===- TrainingJob.cpp - A whole `kiln train` run -------------------------===//

#include "kiln/Driver/TrainingJob.h"
#include "kiln/Data/Corpus.h"
#include "kiln/Data/DataLoader.h"
#include "kiln/Driver/LossCurve.h"
#include "kiln/Driver/Training.h"
#include "kiln/Planner/MemoryPlan.h"
#include "kiln/Runtime/CpuPeak.h"
#include "kiln/Runtime/TokenBatch.h"
#include "kiln/Support/Error.h"
#include "kiln/Support/Json.h"
#include "kiln/Support/Paths.h"

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <fcntl.h>
#include <unistd.h>

namespace kiln {

namespace {

namespace fs = std::filesystem;

volatile std::sig_atomic_t interrupted = 0;
/// SIGINT and SIGTERM (what schedulers send): finish the step, save, stop.
extern "C" void onInterrupt(int) { interrupted = 1; }
/// SIGPIPE (`kiln train | head`): the reader is gone, the run is not. Point
/// stdout at /dev/null (open and dup2 are async-signal-safe) and go on.
extern "C" void onBrokenPipe(int) {
  int null = ::open("/dev/null", O_WRONLY);
  if (null >= 0) {
    ::dup2(null, STDOUT_FILENO);
    ::close(null);
  }
}

/// Removes what a killed save left in `folder`: the `<dir>.tmp.<pid>` and
/// `<dir>.old.<pid>` siblings saveHfCheckpoint renames through.
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
  requireWritableDirectory(path.parent_path().empty() ? fs::path(".") : path.parent_path(),
                           option);
}

/// Every path the run will write, checked at start-up so a typo cannot
/// cost a run its results at the first save or at the end.
void checkOutputPaths(const TrainConfig &config) {
  requireWritableFile(config.metrics.jsonl, "metrics.jsonl");
  requireWritableFile(config.metrics.lossCurve, "metrics.loss_curve");
  requireWritableFile(config.data.saveValidationTokens, "data.save_validation_tokens");
  requireWritableFile(config.debug.saveGrads, "debug.save_grads");
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
      out_.open(path_, std::ios::trunc);
      if (!out_)
        fail("metrics.jsonl: cannot write '{}': {}", path_, std::strerror(errno));
    }
    out_ << record.dump() << "\n" << std::flush;
  }

private:
  std::string path_;
  std::ofstream out_;
};

/// Writes batches as one token file (`kiln eval`'s input format).
void writeTokenFile(const std::string &path, const std::vector<Tensor> &batches) {
  nlohmann::json rows = nlohmann::json::array();
  for (const Tensor &batch : batches)
    for (int64_t r = 0; r < batch.dim(0); ++r) {
      const int64_t *row = batch.data<int64_t>() + r * batch.dim(1);
      rows.push_back(std::vector<int64_t>(row, row + batch.dim(1)));
    }
  writeFileAtomic(path, rows.dump() + "\n");
}

/// Where the training batches come from.
class BatchSource {
public:
  /// `batchRows`: the global batch (every data-parallel rank's rows).
  /// `barrier` synchronises every rank: with a token cache, the leader
  /// tokenizes the corpus and writes the cache while the others wait, then
  /// they load it instead of each tokenizing it again.
  BatchSource(const TrainConfig &c, int64_t batchRows, bool leader,
              const std::function<void()> &barrier) {
    if (c.data.source == "tokens") {
      if (c.data.tokensFile.empty())
        fail("data: source 'tokens' needs data.tokens_file");
      fixed_ = readTokenBatch(c.data.tokensFile);
      return;
    }
    std::string cache = assetCacheDir();
    std::string path = c.data.path;
    if (path.empty() && c.data.source == "brown")
      path = cache + "/brown";
    if (path.empty())
      fail("data: source '{}' needs data.path", c.data.source);
    if (!std::filesystem::exists(path))
      fail("data.path: {} does not exist{}", path,
           c.data.source == "brown" ? " (run scripts/fetch-assets.sh)" : "");
    std::string tokenizerPath =
        c.data.tokenizer.empty() ? cache + "/qwen3/tokenizer.json" : c.data.tokenizer;
    if (!std::filesystem::exists(tokenizerPath))
      fail("data.tokenizer: {} does not exist (run scripts/fetch-assets.sh)", tokenizerPath);
    tokenizer_ = Tokenizer::load(tokenizerPath);
    DataLoaderOptions o;
    o.seqLen = c.training.seqLen;
    o.batchSize = batchRows;
    o.seed = uint64_t(c.data.seed);
    o.validationFraction = c.data.validationFraction;
    o.cacheDir = c.data.cacheDir.empty() ? cache + "/tokens" : c.data.cacheDir;
    auto start = std::chrono::steady_clock::now();
    std::vector<std::string> documents = readCorpus(c.data.source, path);
    bool shareCache = !o.cacheDir.empty();
    if (shareCache && !leader)
      barrier(); // the leader has written the cache
    loader_.emplace(documents, *tokenizer_, o);
    if (shareCache && leader)
      barrier();
    std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
    for (Tensor &batch : loader_->validationBatches())
      if (batch.dim(0) == batchRows) // the captured batch size
        validation_.push_back(std::move(batch));
    if (leader && !c.data.saveValidationTokens.empty() && !validation_.empty())
      writeTokenFile(c.data.saveValidationTokens, validation_);
    fmt::print("data: {} documents from {} ({}), {} tokens{}, {} training windows, {} "
               "held out ({} full validation batches), {:.1f} s\n",
               documents.size(), path, c.data.source, loader_->totalTokens(),
               loader_->loadedFromCache() ? " (cached)" : "", loader_->trainWindowsPerRank(),
               loader_->validationWindows(), validation_.size(), took.count());
  }

  Tensor train(int64_t step) const { return loader_ ? loader_->trainBatch(step) : fixed_; }
  const std::vector<Tensor> &validation() const { return validation_; }

private:
  Tensor fixed_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::optional<DataLoader> loader_;
  std::vector<Tensor> validation_;
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
  fmt::print("  MFU is against this CPU's measured sgemm peak, {:.1f} GFLOP/s\n",
             trainer.peakFlops() / 1e9);
}

void printStep(const StepMetrics &m, double peakFlops) {
  std::string metrics;
  for (const auto &[name, value] : m.metrics)
    metrics += fmt::format("  {} {:.6f}", name, value);
  fmt::print("step {:>5}  loss {:.6f}{}  grad_norm {:.4f}  lr {:.3e}  tok/s {:.0f}  "
             "tflops {:.4f}  mfu {}  mem_live_peak {}  rss_peak {}  ({:.2f} s)\n",
             m.step, m.loss, metrics, m.gradNorm, m.lr, m.tokensPerSecond, m.tflops,
             describeMfu(m.mfu, peakFlops),
             megabytes(m.memLivePeakBytes), megabytes(m.rssPeakBytes), m.seconds);
  std::fflush(stdout);
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
          {"mem_live_peak_bytes", m.memLivePeakBytes},
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
  explicit ProgressBar(int64_t total) : total_(total), enabled_(isatty(STDERR_FILENO)) {}
  void update(int64_t done, double loss, double seconds) {
    if (!enabled_)
      return;
    constexpr int kWidth = 30;
    int filled = int(kWidth * done / total_);
    double eta = done ? seconds / double(done) * double(total_ - done) : 0;
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
  int64_t total_;
  bool enabled_;
};

} // namespace

int runTrainingJob(const TrainConfig &config) {
  checkOutputPaths(config);
  // The Trainer first: it refuses a model whose step cannot fit in memory
  // right after capture, before any data is read or tokenized.
  Trainer trainer(config);
  // Rank 0 prints and writes files; the other ranks compute alongside.
  bool leader = trainer.isLeader();
  if (!leader && !std::freopen("/dev/null", "w", stdout))
    fail("cannot silence the output of rank {}", MpiWorld::get().rank());
  BatchSource data(config, trainer.globalBatchSize(), leader,
                   [&] { trainer.anyRank(false); });
  const Qwen3Config &model = trainer.model();
  fmt::print("kiln train: {} ({} parameters), batch {} x seq {}, {} steps\n", model.name,
             model.parameterCount(), trainer.config().training.localBatchSize,
             trainer.config().training.seqLen, config.training.steps);
  const ParallelLayout &layout = trainer.layout();
  if (layout.worldSize() > 1)
    fmt::print("parallelism: {} ranks, dp_replicate {} x dp_shard {} x tp {} (FSDP2 over "
               "dp_shard, reshard after forward: {}); global batch {}\n",
               layout.worldSize(), layout.dpReplicate, layout.dpShard, layout.tp,
               layout.reshardAfterForward, trainer.globalBatchSize());
  printPlan(trainer);

  if (!config.debug.saveGrads.empty()) {
    TensorMap grads = trainer.gradients(data.train(0));
    if (leader)
      writeSafeTensors(config.debug.saveGrads, grads);
    fmt::print("  wrote step-1 gradients to {}\n", config.debug.saveGrads);
  }
  MetricsLog jsonl(leader ? config.metrics.jsonl : "");
  LossPoints trainCurve, validationCurve;
  auto validate = [&](int64_t step) {
    if (data.validation().empty() ||
        (!validationCurve.empty() && validationCurve.back().first == step))
      return;
    double loss = trainer.evaluate(data.validation());
    validationCurve.push_back({step, loss});
    fmt::print("step {:>5}  validation loss {:.6f} over {} held-out batches\n", step, loss,
               data.validation().size());
    jsonl.write({{"step", step}, {"validation_loss", loss}});
    if (!std::isfinite(loss))
      fail("step {}: the validation loss is {}: the weights are not finite", step, loss);
  };
  auto save = [&](int64_t step) {
    std::string dir =
        (std::filesystem::path(config.checkpoint.folder) / fmt::format("step-{}", step))
            .string();
    std::error_code ec;
    if (leader && fs::exists(dir, ec))
      fmt::print(stderr, "warning: replacing {}, a checkpoint this run did not write\n", dir);
    trainer.saveHf(dir, config.checkpoint.maxShardBytes);
    fmt::print("saved Hugging Face checkpoint {}\n", dir);
  };

  if (leader)
    removeStaleTemporaries(config.checkpoint.folder);
  interrupted = 0;
  auto previous = std::signal(SIGINT, onInterrupt);
  auto previousTerm = std::signal(SIGTERM, onInterrupt);
  auto previousPipe = std::signal(SIGPIPE, onBrokenPipe);
  ProgressBar bar(config.training.steps);
  auto start = std::chrono::steady_clock::now();
  int64_t steps = config.training.steps, done = 0, lastSaved = -1;
  validate(0);
  // Ranks agree on a Ctrl-C, so every one stops after the same step.
  StepMetrics last;
  int64_t lastLogged = 0;
  for (int64_t s = 1; s <= steps && !trainer.anyRank(interrupted); ++s) {
    StepMetrics m = trainer.step(data.train(s - 1));
    done = s;
    trainCurve.push_back({s, m.loss});
    bar.clear();
    bool finite = std::isfinite(m.loss) && std::isfinite(m.gradNorm);
    if (s == 1 || s == steps || s % config.metrics.logFreq == 0 || !finite) {
      printStep(m, trainer.peakFlops());
      jsonl.write(stepJson(m));
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
    if (config.checkpoint.enable && s % config.checkpoint.interval == 0) {
      save(s);
      lastSaved = s;
    }
    std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
    bar.update(s, m.loss, elapsed.count());
  }
  bar.clear();
  // A run cut short (a signal on any rank) always logs the step it stopped
  // after.
  if (done < steps && lastLogged != done) {
    printStep(last, trainer.peakFlops());
    jsonl.write(stepJson(last));
  }
  if (interrupted)
    fmt::print("interrupted: stopping after step {}\n", done);
  // Held-out loss of the final weights (the weights after `done` updates).
  validate(done);
  if ((config.checkpoint.enable || config.checkpoint.lastSaveInHf) && lastSaved != done &&
      done > 0)
    save(done);
  std::signal(SIGINT, previous);
  std::signal(SIGTERM, previousTerm);
  std::signal(SIGPIPE, previousPipe);

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
