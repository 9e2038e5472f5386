//===- CaptureCommand.cpp - kiln capture ----------------------------------===//

#include "Commands.h"
#include "kiln/Backend/CPU/DeviceGrid.h"
#include "kiln/Config/PipelineSchedule.h"
#include "kiln/Dialect/Kiln/IR/KilnOps.h"
#include "kiln/Driver/ParallelLayout.h"
#include "kiln/Driver/PipelineStageFunctions.h"
#include "kiln/Driver/Training.h"
#include "kiln/Frontend/Capture.h"
#include "kiln/Planner/Collective.h"
#include "kiln/Planner/PipelineTimelineSvg.h"
#include "kiln/Planner/ProgramCost.h"
#include "kiln/Support/CommandLine.h"
#include "kiln/Support/Error.h"
#include "kiln/Support/Json.h"

#include "mlir/IR/MLIRContext.h"

#include "llvm/Support/raw_ostream.h"

#include <fmt/core.h>
#include <fmt/ranges.h>

#include <filesystem>
#include <limits>

namespace kiln {

namespace {

void listFlavors() {
  fmt::print("{:<16} {:>6} {:>6} {:>5} {:>8} {:>12} {:>5} {:>14} {:>18} {:>18}\n", "flavor",
             "hidden", "layers", "heads", "kv_heads", "intermediate", "tied", "experts",
             "parameters", "active");
  for (const Qwen3Config &c : Qwen3Config::flavors()) {
    std::string experts =
        c.isMoe() ? fmt::format("{} top-{} x{}", c.numExperts, c.numExpertsPerTok,
                                c.moeIntermediateSize)
                  : "-";
    fmt::print("{:<16} {:>6} {:>6} {:>5} {:>8} {:>12} {:>5} {:>14} {:>18} {:>18}\n", c.name,
               c.hiddenSize, c.numLayers, c.numHeads, c.numKvHeads, c.intermediateSize,
               c.tieWordEmbeddings ? "yes" : "no", experts,
               fmt::format("{} ({:.3f}e9)", c.parameterCount(), c.parameterCount() / 1e9),
               fmt::format("{} ({:.3f}e9)", c.activeParameterCount(),
                           c.activeParameterCount() / 1e9));
  }
}

std::string typeString(mlir::TypeRange types) {
  std::string out;
  for (mlir::Type type : types) {
    auto tensor = mlir::cast<mlir::RankedTensorType>(type);
    std::string dims;
    for (int64_t d : tensor.getShape())
      dims += (dims.empty() ? "" : "x") + std::to_string(d);
    out += (out.empty() ? "" : ", ") + ("[" + dims + "]");
  }
  return out;
}

void printSummary(mlir::ModuleOp module, const Qwen3Config &c) {
  fmt::print("model {}: {} layers, hidden {}, heads {}/{} (kv), head_dim {}, "
             "intermediate {}, vocab {}, {} embeddings\n",
             c.name, c.numLayers, c.hiddenSize, c.numHeads, c.numKvHeads, c.headDim,
             c.intermediateSize, c.vocabSize, c.tieWordEmbeddings ? "tied" : "untied");
  if (c.isMoe())
    fmt::print("experts: {} sparse layers of {} experts, top-{}, moe_intermediate {}; "
               "parameters {} total, {} active per token ({:.2f}e9 / {:.2f}e9)\n",
               c.numSparseLayers(), c.numExperts, c.numExpertsPerTok, c.moeIntermediateSize,
               c.parameterCount(), c.activeParameterCount(), c.parameterCount() / 1e9,
               c.activeParameterCount() / 1e9);
  for (auto fn : module.getOps<mlir::func::FuncOp>()) {
    ProgramCost cost = programCost(fn);
    int64_t ops = 0;
    std::string counts;
    for (auto &[name, n] : cost.opCounts) {
      ops += n;
      counts += fmt::format("{}{} {}", counts.empty() ? "" : ", ", name, n);
    }
    fmt::print("@{}: ({}) -> ({})\n", fn.getName().str(),
               typeString(fn.getArgumentTypes().take_front(1)),
               typeString(fn.getResultTypes()));
    fmt::print("  parameters {} ({:.2f} MB), {} ops: {}\n", cost.parameterCount,
               cost.parameterBytes / 1e6, ops, counts);
    // The token ids come first: FLOPs per token count the routed experts only.
    auto ids = mlir::cast<mlir::RankedTensorType>(fn.getArgumentTypes()[0]);
    fmt::print("  {:.4g} GFLOP ({:.4g} FLOPs/token), {:.4g} MB read, {:.4g} MB written\n",
               cost.flops / 1e9, cost.flops / double(ids.getNumElements()),
               cost.bytesRead / 1e6, cost.bytesWritten / 1e6);
  }
}

/// Bytes each collective of a per-rank program sends from one rank, by the
/// op and the grid axes it runs over (ring algorithms, Planner/Collective.h).
std::map<std::string, std::pair<int64_t, int64_t>> collectiveTraffic(mlir::func::FuncOp fn) {
  std::map<std::string, std::pair<int64_t, int64_t>> byAxes; // count, bytes
  fn.walk([&](mlir::Operation *op) {
    std::optional<Collective> c = describeCollective(op);
    if (!c)
      return;
    auto &entry = byAxes[op->getName().getStringRef().str() + " on " + c->axes];
    ++entry.first;
    entry.second += c->bytesSent;
  });
  return byAxes;
}

/// The header of the per-rank program as rank `rank` runs it: the SPMD
/// program is the same on every rank; the rank's grid coordinates say which
/// slices it holds.
std::string rankHeader(const ParallelLayout &layout, int64_t rank) {
  std::string text = fmt::format("// rank {} of {}:", rank, layout.worldSize());
  std::vector<int64_t> coords = DeviceGrid::coordinatesOf(layout.shape(), rank);
  std::vector<std::string> names = layout.axisNames();
  for (size_t a = 0; a < coords.size(); ++a)
    text += fmt::format(" {}={}", names[a], coords[a]);
  return text + " (every rank runs this program on its own slices)\n";
}

/// The options the stage functions of `layout` are captured under: with
/// several ranks to a stage (FSDP, TP inside it), partitioned for the
/// layout without its pipeline axis.
std::unique_ptr<KilnPipelineOptions>
stageOptions(const TrainConfig &train, const Qwen3Config &model, const ParallelLayout &layout) {
  ParallelLayout inner = layout;
  inner.pp = 1;
  return pipelineOptions(train, model, inner.worldSize() > 1 ? &inner : nullptr);
}

/// Rank `rank`'s program under pipeline parallelism: the forward and
/// backward of its pipeline rank's stages in `module` (captureStage-
/// Functions), then that pipeline rank's update of one schedule run
/// (@train_step), each rank of a partitioned stage running them on its own
/// slices.
std::string pipelineRankText(mlir::ModuleOp module, const ParallelLayout &layout,
                             const PipelineSchedule &schedule, const KilnPipelineOptions &options,
                             int64_t rank) {
  int64_t pipelineRank = layout.pipelineRankOf(rank);
  std::vector<int64_t> stages = layout.stages.stagesOf(pipelineRank);
  std::string text = fmt::format("// rank {} of {}: pp rank {}, stages {}\n", rank,
                                 layout.worldSize(), pipelineRank, fmt::join(stages, " "));
  bool partitioned = options.worldSize() > 1;
  if (partitioned)
    text += rankHeader(layout, rank);
  llvm::raw_string_ostream os(text);
  for (int64_t s : stages)
    for (const char *part : {"forward", "backward"})
      stageFunction(module, s, part).print(os), os << "\n";
  // Replicas of whole stages sum their gradients in the update.
  std::vector<int64_t> replicaAxes;
  if (!partitioned && layout.dpReplicate > 1)
    replicaAxes.push_back(1); // [pp, dp_replicate, ...]
  mlir::OwningOpRef<mlir::ModuleOp> copy = module.clone();
  addPipelineUpdate(*copy, options, schedule.microbatches * (partitioned ? 1 : layout.dpReplicate),
                    layout.pp, pipelineRank, layout.shape(), layout.axisNames(), replicaAxes)
      .print(os);
  os << "\n";
  return text;
}

/// `--dump-ranks` under pipeline parallelism: the stages, their parameters,
/// what crosses them and what each keeps per microbatch (per rank of a
/// partitioned stage), what each pipeline rank holds at its peak, each
/// rank's schedule (its pipeline rank's actions) and program
/// (pipelineRankText), into `folder`.
int dumpPipeline(mlir::MLIRContext &context, const Qwen3Config &model, const ParallelLayout &layout,
                 int64_t localBatchSize, int64_t seq, const KilnPipelineOptions &options,
                 const std::string &folder) {
  PipelineSchedule schedule = layout.pipelineSchedule(localBatchSize);
  auto module = captureStageFunctions(context, model, layout, seq, options);
  std::vector<StageFootprint> footprints = stageFootprints(*module, layout.stages.numStages());
  std::string summary =
      fmt::format("{} ranks: pp {} x dp_replicate {} x dp_shard {} x tp {}\n"
                  "pipeline: {} stages ({} per rank), schedule {}, {} microbatches of {} rows\n",
                  layout.worldSize(), layout.pp, layout.dpReplicate, layout.dpShard, layout.tp,
                  layout.stages.numStages(), layout.stages.stagesPerRank, wordOf(schedule.kind),
                  schedule.microbatches, layout.microbatchSize);
  if (options.worldSize() > 1)
    summary.insert(summary.size() - 1,
                   fmt::format("; each stage partitioned over its pipeline rank's {} ranks "
                               "(the figures below are one rank's)",
                               options.worldSize()));
  std::vector<int64_t> residualBytes;
  // Each pipeline rank's parameters (a tied table once per rank).
  std::vector<std::map<std::string, int64_t>> rankParameters(layout.pp);
  for (int64_t s = 0; s < layout.stages.numStages(); ++s) {
    int64_t parameterBytes = 0;
    for (const auto &[key, bytes] : footprints[s].parameterBytes) {
      parameterBytes += bytes;
      rankParameters[layout.stages.rankOf(s)][key] = bytes;
    }
    summary += fmt::format("  stage {} on pp rank {}: {}\n", s, layout.stages.rankOf(s),
                           fmt::join(layout.stages.modules[s], " "));
    summary += fmt::format("    parameters {} bytes; per microbatch: sends {} bytes, keeps {} "
                           "bytes for its backward\n",
                           parameterBytes, footprints[s].sentBytes, footprints[s].residualBytes);
    residualBytes.push_back(footprints[s].residualBytes);
  }
  // A backward costs about two forwards; transfers are not timed here.
  PipelineTimeline timeline = simulate(schedule, 1, 2);
  summary += fmt::format("bubble with backward = 2 x forward: {:.1f}% of the step; microbatches "
                         "in flight at the peak, per pp rank: {}\n",
                         100 * timeline.bubbleFraction, fmt::join(timeline.peakInFlight, " "));
  std::vector<int64_t> held = peakHeldBytes(schedule, residualBytes), state, total;
  for (int64_t r = 0; r < layout.pp; ++r) {
    int64_t bytes = 0;
    for (const auto &[key, b] : rankParameters[r])
      bytes += b;
    // The parameters, their summed gradients and the two AdamW moments.
    state.push_back(4 * bytes);
    total.push_back(state.back() + held[r]);
  }
  summary +=
      fmt::format("activations kept at the peak, per pp rank (bytes): {}\n", fmt::join(held, " "));
  summary += fmt::format("parameters, gradients and AdamW moments per pp rank (bytes): {}\n"
                         "held at the peak per pp rank, before the running stage's own "
                         "temporaries (bytes): {}\n",
                         fmt::join(state, " "), fmt::join(total, " "));
  std::error_code ec;
  std::filesystem::create_directories(folder, ec);
  if (ec)
    fail("capture: --dump-ranks {}: {}", folder, ec.message());
  for (int64_t r = 0; r < layout.worldSize(); ++r) {
    int64_t pipelineRank = layout.pipelineRankOf(r);
    std::vector<int64_t> stages = layout.stages.stagesOf(pipelineRank);
    std::string header = fmt::format("// rank {} of {}: pp rank {}, stages {}\n", r,
                                     layout.worldSize(), pipelineRank, fmt::join(stages, " "));
    writeFileAtomic(fmt::format("{}/rank-{}.schedule", folder, r),
                    header + schedule.str(pipelineRank));
    writeFileAtomic(fmt::format("{}/rank-{}.mlir", folder, r),
                    pipelineRankText(*module, layout, schedule, options, r));
  }
  writeFileAtomic(folder + "/summary.txt", summary);
  // The schedule drawn with a backward taking two forwards (docs/parallelism.md).
  writeFileAtomic(folder + "/timeline.svg",
                  pipelineTimelineSvg(schedule, timeline,
                                      fmt::format("{} on {} pipeline ranks, {} microbatches "
                                                  "(backward = 2 x forward)",
                                                  wordOf(schedule.kind), schedule.degree,
                                                  schedule.microbatches)));
  fmt::print("{}wrote {} per-rank schedules and stage functions, and the schedule's timeline "
             "(timeline.svg), to {}\n",
             summary, layout.worldSize(), folder);
  return 0;
}

std::string moduleText(mlir::ModuleOp module) {
  std::string text;
  llvm::raw_string_ostream os(text);
  module->print(os);
  return text;
}

} // namespace

int runCapture(const std::vector<std::string> &allArgs) {
  // --parallelism.*, --override.*, --target.*, --activation_checkpoint.* and
  // --model.<config.json field>=<value> as `kiln train` takes them.
  std::vector<std::string> args, parallelism, trainOptions, modelFields;
  for (const std::string &a : allArgs) {
    bool isTrainOption = a.rfind("--override.", 0) == 0 || a.rfind("--target.", 0) == 0 ||
                         a.rfind("--activation_checkpoint.", 0) == 0;
    (a.rfind("--parallelism.", 0) == 0 ? parallelism
     : isTrainOption                   ? trainOptions
     : a.rfind("--model.", 0) == 0     ? modelFields
                                       : args)
        .push_back(a);
  }
  OptionList options("capture", args, {"list-flavors", "summary", "train-step"});
  if (options.flag("list-flavors")) {
    options.finish();
    listFlavors();
    return 0;
  }
  // `--model` (a directory or a flavor) with the field overrides, resolved as
  // `kiln train` resolves its model section.
  modelFields.push_back("--model.flavor=" + options.required("model"));
  Qwen3Config config = TrainConfig::load("", modelFields).model.resolve();
  CaptureOptions capture;
  capture.batch = options.integer("batch", 1);
  // 0 asks captureQwen3 for its default length; a given --seq must be real.
  constexpr int64_t kUnset = std::numeric_limits<int64_t>::min();
  int64_t seq = options.integer("seq", kUnset);
  if (seq != kUnset && seq <= 0)
    fail("capture: --seq must be a positive integer, got {}", seq);
  capture.seq = seq == kUnset ? 0 : seq;
  std::optional<std::string> output = options.value("o");
  bool summary = options.flag("summary");
  bool trainStep = options.flag("train-step");
  std::optional<std::string> runConfig = options.value("config");
  std::optional<std::string> rankOption = options.value("rank");
  std::optional<std::string> dumpRanks = options.value("dump-ranks");
  options.finish();
  if (!parallelism.empty() && !trainStep)
    fail("capture: --parallelism.* options shard the training step; add --train-step");

  mlir::MLIRContext context;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  ParallelLayout layout;
  // The optimizer's hyper-parameters, the layout and the override rules come
  // from a run config and the options above (torchtitan's defaults without);
  // the model and shapes from the flags. --batch is the per-data-parallel-rank
  // batch.
  std::vector<std::string> trainOverrides = parallelism;
  trainOverrides.insert(trainOverrides.end(), trainOptions.begin(), trainOptions.end());
  trainOverrides.push_back("--model.flavor=" + config.name);
  TrainConfig train = TrainConfig::load(runConfig ? *runConfig : "", trainOverrides);
  if (trainStep || runConfig) {
    int64_t seq = capture.seq ? capture.seq : std::min<int64_t>(2048, config.maxPositionEmbeddings);
    layout = ParallelLayout::resolve(train.parallelism, config, seq, 1);
    if (layout.pp > 1 && (dumpRanks || rankOption)) {
      std::unique_ptr<KilnPipelineOptions> options = stageOptions(train, config, layout);
      if (dumpRanks)
        return dumpPipeline(context, config, layout, capture.batch, seq, *options, *dumpRanks);
      int64_t rank = std::stoll(*rankOption);
      if (rank < 0 || rank >= layout.worldSize())
        fail("capture: --rank {} is outside the world of {} ranks", rank, layout.worldSize());
      auto stages = captureStageFunctions(context, config, layout, seq, *options);
      std::string text =
          pipelineRankText(*stages, layout, layout.pipelineSchedule(capture.batch), *options, rank);
      if (output)
        writeFileAtomic(*output, text);
      else
        fmt::print("{}", text);
      return 0;
    }
    capture.batch *= layout.dataParallelDegree();
    module = captureTrainingStep(context, config, capture, *pipelineOptions(train, config, &layout));
  } else {
    module = captureTrainingStep(context, config, capture, *pipelineOptions(train, config, nullptr),
                                 LoweringStage::Forward);
  }
  int64_t rank = rankOption ? std::stoll(*rankOption) : 0;
  if (rank < 0 || rank >= layout.worldSize())
    fail("capture: --rank {} is outside the world of {} ranks", rank, layout.worldSize());
  if (dumpRanks) {
    if (layout.worldSize() < 2)
      fail("capture: --dump-ranks needs a layout of several ranks (--parallelism.*)");
    std::string summaryText = fmt::format("{} ranks: dp_replicate {} x dp_shard {} x tp {}\n",
                                          layout.worldSize(), layout.dpReplicate,
                                          layout.dpShard, layout.tp);
    auto step = module->lookupSymbol<mlir::func::FuncOp>("train_step");
    summaryText += "collectives of one step, per rank:\n";
    for (auto &[key, entry] : collectiveTraffic(step))
      summaryText += fmt::format("  {:<36} {:>6} ops {:>14} bytes sent\n", key, entry.first,
                                 entry.second);
    std::error_code ec;
    std::filesystem::create_directories(*dumpRanks, ec);
    if (ec)
      fail("capture: --dump-ranks {}: {}", *dumpRanks, ec.message());
    std::string program = moduleText(*module); // printed once for every rank
    for (int64_t r = 0; r < layout.worldSize(); ++r)
      writeFileAtomic(fmt::format("{}/rank-{}.mlir", *dumpRanks, r),
                      rankHeader(layout, r) + program);
    writeFileAtomic(*dumpRanks + "/summary.txt", summaryText);
    fmt::print("{}wrote {} per-rank programs to {}\n", summaryText, layout.worldSize(),
               *dumpRanks);
    return 0;
  }
  std::string text =
      (layout.worldSize() > 1 ? rankHeader(layout, rank) : "") + moduleText(*module);
  if (output)
    writeFileAtomic(*output, text);
  if (summary)
    printSummary(*module, config);
  else if (!output)
    fmt::print("{}", text);
  return 0;
}

} // namespace kiln
