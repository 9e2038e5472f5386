//===- TrainCommand.cpp - kiln train --------------------------------------===//

#include "Commands.h"
#include "kiln/Driver/Training.h"
#include "kiln/Runtime/TokenBatch.h"
#include "kiln/Support/Error.h"

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

namespace kiln {

namespace {

std::string megabytes(int64_t bytes) { return fmt::format("{:.1f} MB", bytes / 1e6); }

void printStep(const StepMetrics &m) {
  fmt::print("step {:>5}  loss {:.6f}  grad_norm {:.4f}  lr {:.3e}  tok/s {:.0f}  "
             "tflops {:.4f}  mfu {:.2f}%  mem_live_peak {}  rss_peak {}  ({:.2f} s)\n",
             m.step, m.loss, m.gradNorm, m.lr, m.tokensPerSecond, m.tflops, 100 * m.mfu,
             megabytes(m.memLivePeakBytes), megabytes(m.rssPeakBytes), m.seconds);
  std::fflush(stdout);
}

nlohmann::json stepJson(const StepMetrics &m) {
  return {{"step", m.step},
          {"loss", m.loss},
          {"grad_norm", m.gradNorm},
          {"lr", m.lr},
          {"seconds", m.seconds},
          {"tokens_per_s", m.tokensPerSecond},
          {"tflops", m.tflops},
          {"mfu", m.mfu},
          {"mem_live_peak_bytes", m.memLivePeakBytes},
          {"rss_peak_bytes", m.rssPeakBytes}};
}

} // namespace

int runTrain(const std::vector<std::string> &args) {
  std::string configPath;
  std::vector<std::string> overrides;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--config" && i + 1 < args.size())
      configPath = args[++i];
    else if (args[i].rfind("--config=", 0) == 0)
      configPath = args[i].substr(9);
    else
      overrides.push_back(args[i]);
  }
  TrainConfig config = TrainConfig::load(configPath, overrides);
  if (config.data.tokensFile.empty())
    fail("data.tokens_file: set a token batch file (a JSON list of equal-length id lists)");
  Tensor tokens = readTokenBatch(config.data.tokensFile);

  Trainer trainer(config);
  const Qwen3Config &model = trainer.model();
  fmt::print("kiln train: {} ({} parameters), batch {} x seq {}, {} steps\n", model.name,
             model.parameterCount(), config.training.localBatchSize, config.training.seqLen,
             config.training.steps);
  fmt::print("  FLOPs/token {:.4g} (6 x matmul params + 12 x layers x heads x head_dim x "
             "seq); MFU against this CPU's measured sgemm peak {:.1f} GFLOP/s\n",
             trainer.flopsPerToken(), trainer.peakFlops() / 1e9);

  if (!config.debug.saveGrads.empty()) {
    writeSafeTensors(config.debug.saveGrads, trainer.gradients(tokens));
    fmt::print("  wrote step-1 gradients to {}\n", config.debug.saveGrads);
  }
  std::ofstream jsonl;
  if (!config.metrics.jsonl.empty()) {
    jsonl.open(config.metrics.jsonl, std::ios::trunc);
    if (!jsonl)
      fail("metrics.jsonl: cannot write '{}'", config.metrics.jsonl);
  }

  auto save = [&](int64_t step) {
    std::string dir =
        (std::filesystem::path(config.checkpoint.folder) / fmt::format("step-{}", step))
            .string();
    trainer.saveHf(dir, config.checkpoint.maxShardBytes);
    fmt::print("  saved Hugging Face checkpoint {}\n", dir);
  };
  int64_t steps = config.training.steps, lastSaved = -1;
  for (int64_t s = 1; s <= steps; ++s) {
    StepMetrics m = trainer.step(tokens);
    if (s == 1 || s == steps || s % config.metrics.logFreq == 0) {
      printStep(m);
      if (jsonl.is_open())
        jsonl << stepJson(m).dump() << "\n" << std::flush;
    }
    if (config.checkpoint.enable && s % config.checkpoint.interval == 0) {
      save(s);
      lastSaved = s;
    }
  }
  if ((config.checkpoint.enable || config.checkpoint.lastSaveInHf) && lastSaved != steps)
    save(steps);
  return 0;
}

} // namespace kiln
