//===- LayoutSearch.cpp - kiln plan --search ------------------------------===//

#include "kiln/Driver/LayoutSearch.h"
#include "kiln/Config/SelectiveAcOption.h"
#include "kiln/Driver/LayerScaledPlan.h"
#include "kiln/Driver/Planning.h"
#include "kiln/Support/Error.h"
#include "kiln/Support/ParallelFor.h"
#include "kiln/Support/Seconds.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <thread>
#include <chrono>
#include <limits>

namespace kiln {

SearchObjective parseSearchObjective(const std::string &name) {
  if (name == "tokens_per_second")
    return SearchObjective::TokensPerSecond;
  if (name == "usd_per_million_tokens")
    return SearchObjective::UsdPerMillionTokens;
  fail("plan: --search-by must be tokens_per_second or usd_per_million_tokens, got '{}'", name);
}

const char *searchObjectiveName(SearchObjective objective) {
  return objective == SearchObjective::TokensPerSecond ? "tokens_per_second"
                                                       : "usd_per_million_tokens";
}

std::vector<CheckpointingChoice> parseSearchCheckpointing(const std::string &list) {
  std::vector<CheckpointingChoice> out;
  size_t begin = 0;
  while (true) {
    size_t end = list.find(',', begin);
    std::string word = list.substr(begin, end == std::string::npos ? end : end - begin);
    CheckpointingChoice choice;
    std::optional<SelectiveAcOption> selective;
    if (word.rfind("selective:", 0) == 0)
      selective = parseSelectiveAcOption(word.substr(10));
    std::optional<CheckpointMode> mode = parseWord<CheckpointMode>(word);
    if (mode && mode != CheckpointMode::Selective) {
      choice.mode = *mode;
    } else if (mode) {
      choice.mode = CheckpointMode::Selective;
      choice.selectiveAcOption = "op";
    } else if (selective && !selective->opLevel) { // "op" is spelt "selective"
      choice.mode = CheckpointMode::Selective;
      choice.selectiveAcOption = word.substr(10);
    } else {
      fail("plan: --search-ac takes a comma-separated list of none, selective, selective:N "
           "(N a positive integer: every N-th layer) and full, got '{}' in '{}'",
           word, list);
    }
    out.push_back(choice);
    if (end == std::string::npos)
      return out;
    begin = end + 1;
  }
}

std::string describeCheckpointing(const CheckpointingChoice &choice) {
  if (choice.mode == CheckpointMode::None)
    return "no AC";
  if (choice.mode == CheckpointMode::Full)
    return "AC full";
  if (choice.selectiveAcOption == "op")
    return "AC selective op";
  return "AC selective every " + choice.selectiveAcOption;
}

std::string SearchCandidate::describe() const {
  return fmt::format("{}dp_replicate {} x dp_shard {}{} x tp {}{}{}, {}, local batch {}{}",
                     pp > 1 ? fmt::format("pp {} ({}) x ", pp, wordOf(schedule)) : "", dpReplicate,
                     dpShard, cp > 1 ? fmt::format(" x cp {}", cp) : "", tp,
                     sequenceParallel ? " (sp)" : "", ep > 1 ? fmt::format(", ep {}", ep) : "",
                     describeCheckpointing(checkpointing), localBatchSize,
                     pp > 1 ? fmt::format(" in microbatches of {}", microbatchSize) : "");
}

TrainConfig SearchCandidate::apply(const TrainConfig &base) const {
  TrainConfig config = base;
  config.parallelism.dataParallelReplicateDegree = dpReplicate;
  config.parallelism.dataParallelShardDegree = dpShard;
  config.parallelism.tensorParallelDegree = tp;
  config.parallelism.expertParallelDegree = ep;
  config.parallelism.contextParallelDegree = cp;
  config.parallelism.enableSequenceParallel = sequenceParallel;
  config.parallelism.pipelineParallelDegree = pp;
  config.parallelism.pipelineParallelSchedule = schedule;
  config.parallelism.pipelineParallelMicrobatchSize = microbatchSize;
  config.activationCheckpoint = checkpointing;
  config.training.localBatchSize = localBatchSize;
  return config;
}

double SearchResult::value(SearchObjective objective) const {
  if (!plan)
    return objective == SearchObjective::TokensPerSecond ? -std::numeric_limits<double>::infinity()
                                                         : std::numeric_limits<double>::infinity();
  return objective == SearchObjective::TokensPerSecond ? plan->tokensPerSecondPerDevice
                                                       : plan->usdPerMillionTokens;
}

namespace {

/// The layouts of `world` ranks: tensor parallelism within a node (its
/// degree a divisor of the ranks per node), with and without sequence
/// parallelism, and over several nodes also HSDP (replicas across nodes,
/// FSDP within one); for a model of `experts` experts (0: dense) also expert
/// parallelism over 2, 4, ... of the FSDP ranks, up to `maxExpertParallel`;
/// and context parallelism over 2, 4, ... of them, up to `maxContext`, where
/// `blocksPerRank` x cp divides the sequence of `seqLen`.
std::vector<SearchCandidate> layouts(int64_t world, int64_t ranksPerNode, int64_t nodes,
                                     int64_t experts, int64_t maxExpertParallel,
                                     int64_t maxContext = 1, int64_t seqLen = 0,
                                     int64_t blocksPerRank = 1) {
  std::vector<SearchCandidate> out;
  for (int64_t tp = 1; tp <= std::min(world, ranksPerNode); ++tp) {
    if (ranksPerNode % tp || world % tp)
      continue;
    std::vector<int64_t> replicas = {1};
    if (nodes > 1 && (world / tp) % nodes == 0 && world / tp / nodes > 1)
      replicas.push_back(nodes);
    for (int64_t replicate : replicas)
      for (bool sp : tp > 1 ? std::vector<bool>{true, false} : std::vector<bool>{false}) {
        for (int64_t cp = 1; cp <= maxContext; cp *= 2) {
          int64_t fsdp = world / tp / replicate;
          if (fsdp % cp || (cp > 1 && seqLen % (cp * blocksPerRank)))
            continue;
          SearchCandidate c;
          c.dpReplicate = replicate;
          c.dpShard = fsdp / cp;
          c.cp = cp;
          c.tp = tp;
          c.sequenceParallel = sp;
          out.push_back(c);
          for (c.ep = 2; experts > 0 && c.ep <= maxExpertParallel; c.ep *= 2)
            if (c.dpShard % c.ep == 0 && experts % c.ep == 0)
              out.push_back(c);
        }
      }
  }
  return out;
}

/// Pipeline layouts of `world` ranks on nodes of `ranksPerNode`: pp 2, 4,
/// ... up to `maxPipeline` dividing it, under 1F1B and Interleaved1F1B
/// (GPipe takes 1F1B's time and holds more); within a pipeline rank's
/// world / pp ranks, replicas of whole stages or the stages partitioned as
/// layouts() partitions a world (FSDP, HSDP, TP with and without SP; EP
/// inside a stage is not built).
std::vector<SearchCandidate> pipelineLayouts(int64_t world, int64_t ranksPerNode,
                                             int64_t maxPipeline) {
  std::vector<SearchCandidate> out;
  for (int64_t pp = 2; pp <= std::min(world, maxPipeline); pp *= 2) {
    if (world % pp)
      continue;
    int64_t inner = world / pp;
    SearchCandidate replicas;
    replicas.dpReplicate = inner;
    std::vector<SearchCandidate> stages = {replicas};
    if (inner > 1)
      for (const SearchCandidate &c :
           layouts(inner, ranksPerNode, std::max<int64_t>(1, inner / ranksPerNode), 0, 0))
        stages.push_back(c);
    for (PipelineScheduleKind schedule :
         {PipelineScheduleKind::OneFOneB, PipelineScheduleKind::Interleaved1F1B})
      for (SearchCandidate c : stages) {
        c.pp = pp;
        c.schedule = schedule;
        out.push_back(c);
      }
  }
  return out;
}

/// Plans one candidate on the target's world. The result has no plan when
/// the layout rules refuse it, and says why not when it does not fit: by how
/// much, and its largest buffer.
SearchResult planCandidate(const SearchCandidate &candidate, const TrainConfig &base,
                           const TargetProfile &target, int64_t nodes,
                           const SearchOptions &options) {
  SearchResult result;
  result.candidate = candidate;
  try {
    TrainConfig config = candidate.apply(base);
    config.parallelism.worldSize = 0; // the target's world
    // A pipeline's stages are not the repeating layers scaling assumes.
    if (options.scaleFromLayers && candidate.pp == 1)
      result.plan = planScaledFromLayers(config, target, nodes, options.timing);
    if (!result.plan)
      result.plan = planTrainingRun(config, target, nodes, options.timing);
  } catch (const Error &e) {
    result.whyNot = e.what();
    return result;
  }
  if (!result.plan->fits) {
    result.whyNot =
        fmt::format("needs {:.2f} GiB per rank, {:.2f} GiB over the {:.2f} GiB of a rank",
                    double(result.plan->deviceBytes) / (1ll << 30),
                    double(result.plan->deviceBytes - target.memoryBytes) / (1ll << 30),
                    double(target.memoryBytes) / (1ll << 30));
    if (!result.plan->memory.topContributors.empty()) {
      const MemoryPlan::Contributor &top = result.plan->memory.topContributors.front();
      result.whyNot += fmt::format("; largest buffer {} ({:.2f} GiB, {})", top.what,
                                   double(top.bytes) / (1ll << 30),
                                   memoryCategoryName(top.category));
    }
  }
  return result;
}

} // namespace

namespace {

/// What one layout gave: its candidates in the order they were planned.
struct LayoutOutcome {
  std::vector<SearchResult> fitting, notFitting, refused;
  int64_t planned = 0, pruned = 0;
};

/// Bytes per rank that parameters and AdamW's state take at least under
/// `layout`: every parameter is sharded over at most dp_shard x tp ranks
/// (experts over ep of the dp_shard ranks, FSDP over the rest), each
/// element held as a master weight and two moments.
int64_t parameterStateLowerBound(int64_t parameters, const SearchCandidate &layout,
                                 const TargetProfile &target) {
  // The largest pipeline stage holds at least 1/pp of them.
  int64_t shards = layout.dpShard * layout.cp * layout.tp * layout.pp;
  int64_t elements = (parameters + shards - 1) / shards;
  return elements * (target.precision.masterBytes + 2 * target.precision.optimizerBytes);
}

} // namespace

int64_t defaultPlanningWorkers(const TargetProfile &target) {
  if (target.gemmSeconds)
    return 1;
  return std::min<int64_t>(kMaxSearchWorkers,
                           int64_t(std::max(1u, std::thread::hardware_concurrency())));
}

LayoutSearch searchLayouts(const TrainConfig &base, const TargetProfile &target, int64_t nodes,
                           const SearchOptions &options) {
  if (options.maxLocalBatchSize < 1)
    fail("plan: --search-max-local-batch must be at least 1, got {}", options.maxLocalBatchSize);
  Clock::time_point start = Clock::now();
  LayoutSearch search;
  search.objective = options.objective;
  if (options.checkpointing.empty())
    fail("plan: --search-ac names no activation-checkpointing setting");
  Qwen3Config model = base.model.resolve();
  int64_t experts = model.isMoe() && model.numSparseLayers() > 0 ? model.numExperts : 0;
  std::vector<SearchCandidate> all = layouts(
      target.ranksPerNode * nodes, target.ranksPerNode, nodes, experts, options.maxExpertParallel,
      options.maxContextParallel, base.training.seqLen,
      base.parallelism.contextParallelLoadBalancer == ContextParallelLoadBalancer::HeadTail ? 2
                                                                                            : 1);
  for (const SearchCandidate &c : pipelineLayouts(target.ranksPerNode * nodes, target.ranksPerNode,
                                                  options.maxPipelineParallel))
    all.push_back(c);
  auto better = [&](const SearchResult &a, const SearchResult &b) {
    return options.objective == SearchObjective::TokensPerSecond
               ? a.value(options.objective) > b.value(options.objective)
               : a.value(options.objective) < b.value(options.objective);
  };

  // Progress, shared by the workers: reported after each candidate.
  std::mutex progressLock;
  SearchProgress progress;
  progress.layoutsTotal = int64_t(all.size());
  std::optional<SearchResult> best;
  auto report = [&](const SearchResult *planned, bool layoutDone) {
    std::lock_guard<std::mutex> hold(progressLock);
    if (planned) {
      ++progress.planned;
      if (planned->fits()) {
        ++progress.fitting;
        if (!best || better(*planned, *best))
          best = *planned;
      }
    }
    progress.layoutsDone += layoutDone;
    if (!options.onProgress)
      return;
    progress.best = best ? &*best : nullptr;
    progress.seconds = secondsSince(start);
    options.onProgress(progress);
  };

  // One layout: its checkpointings and batches in order, each stopping at
  // the first batch that does not fit.
  auto searchLayout = [&](const SearchCandidate &layout) {
    LayoutOutcome out;
    // Parameters and optimizer state alone over the rank: no checkpointing
    // or batch makes it fit, so it is not planned.
    int64_t bound =
        devicePeakBytes(parameterStateLowerBound(model.parameterCount(), layout, target), target);
    if (bound > target.memoryBytes) {
      SearchResult pruned;
      pruned.candidate = layout;
      pruned.candidate.checkpointing = options.checkpointing.front();
      pruned.candidate.localBatchSize = layout.pp; // a pipeline's smallest
      pruned.whyNot = fmt::format(
          "parameters and optimizer state alone need at least {} per rank ({} parameters over "
          "{}dp_shard {} x tp {} ranks), over the {} of a rank: not planned",
          formatGib(bound), model.parameterCount(),
          layout.pp > 1 ? fmt::format("pp {} x ", layout.pp) : "", layout.dpShard, layout.tp,
          formatGib(target.memoryBytes));
      out.refused.push_back(std::move(pruned));
      out.pruned = 1;
      report(nullptr, true);
      return out;
    }
    bool layoutRefused = false;
    for (const CheckpointingChoice &checkpointing : options.checkpointing) {
      // A pipeline's schedules need a microbatch per rank at least.
      bool stop = false;
      for (int64_t batch = layout.pp; batch <= options.maxLocalBatchSize && !layoutRefused;
           batch *= 2) {
        // A fixed global batch (training.global_batch_size) takes the local
        // batches whose microbatches divide it; the rest accumulate.
        int64_t global = base.training.globalBatchSize;
        if (global != -1 && global % (batch * layout.dpReplicate * layout.dpShard))
          continue;
        // A pipeline's microbatches of 1, 2, ... rows, at least one per
        // pipeline rank; one microbatch of the whole batch without one.
        for (int64_t rows = layout.pp > 1 ? 1 : batch; batch / rows >= layout.pp; rows *= 2) {
          SearchCandidate candidate = layout;
          candidate.checkpointing = checkpointing;
          candidate.localBatchSize = batch;
          candidate.microbatchSize = layout.pp > 1 ? rows : 1;
          ++out.planned;
          SearchResult result = planCandidate(candidate, base, target, nodes, options);
          report(&result, false);
          if (!result.plan) {
            // The layout rules refuse it: no batch size or checkpointing
            // changes that.
            out.refused.push_back(std::move(result));
            layoutRefused = true;
            break;
          }
          if (!result.fits()) {
            out.notFitting.push_back(std::move(result));
            // Larger microbatches and batches need more memory still.
            stop = rows == (layout.pp > 1 ? 1 : batch);
            break;
          }
          out.fitting.push_back(std::move(result));
        }
        if (layoutRefused || stop)
          break;
      }
    }
    report(nullptr, true);
    return out;
  };

  // Layouts are independent (each candidate has its own MLIR context): the
  // workers take them in turn. The cpu target times GEMMs on this machine
  // as it plans, which other workers would disturb: one worker there.
  std::vector<LayoutOutcome> outcomes(all.size());
  // At most 8 by default: a whole 405B program takes about 0.4 GiB to plan,
  // and the candidates that cannot be scaled are planned whole.
  int64_t workers = defaultPlanningWorkers(target);
  if (options.workers > 0 && !target.gemmSeconds)
    workers = options.workers;
  parallelFor(all.size(), workers, [&](size_t i) { outcomes[i] = searchLayout(all[i]); });

  // In layout order, as one worker would have found them.
  std::vector<SearchResult> refused;
  for (LayoutOutcome &o : outcomes) {
    search.planned += o.planned;
    search.pruned += o.pruned;
    for (SearchResult &r : o.fitting)
      search.fitting.push_back(std::move(r));
    for (SearchResult &r : o.notFitting)
      search.notFitting.push_back(std::move(r));
    for (SearchResult &r : o.refused)
      refused.push_back(std::move(r));
  }
  report(nullptr, false);
  std::stable_sort(search.fitting.begin(), search.fitting.end(), better);
  std::stable_sort(search.notFitting.begin(), search.notFitting.end(), better);
  for (SearchResult &r : refused)
    search.notFitting.push_back(std::move(r));
  search.seconds = secondsSince(start);
  return search;
}

std::string describeSearchProgress(const SearchProgress &p, SearchObjective objective) {
  std::string out = fmt::format("search: {} of {} layouts ({} planned, {} fit, {:.1f} s)",
                                p.layoutsDone, p.layoutsTotal, p.planned, p.fitting, p.seconds);
  if (p.best)
    out += fmt::format(
        "; best so far: {} at {}", p.best->candidate.describe(),
        objective == SearchObjective::TokensPerSecond
            ? fmt::format("{:.1f} tokens/s per device", p.best->plan->tokensPerSecondPerDevice)
            : fmt::format("${:.3f} per million tokens", p.best->plan->usdPerMillionTokens));
  return out;
}

namespace {
std::string row(const SearchResult &r) {
  const StepPlan &p = *r.plan;
  return fmt::format("  {:<70} {:>9.2f} GiB {:>10.4g} s {:>10.1f} {:>6.1f}% {:>10.4g}\n",
                     r.candidate.describe(), double(p.deviceBytes) / (1ll << 30), p.stepSeconds,
                     p.tokensPerSecondPerDevice, 100 * p.mfu, p.usdPerMillionTokens);
}
} // namespace

std::string formatSearch(const LayoutSearch &search, int64_t top) {
  std::string out =
      fmt::format("search: {} layouts planned{} in {:.1f} s; {} fit, ranked by {}\n",
                  search.planned,
                  search.pruned ? fmt::format(" ({} more not planned: their parameters and "
                                              "optimizer state alone do not fit)",
                                              search.pruned)
                                : "",
                  search.seconds, search.fitting.size(), searchObjectiveName(search.objective));
  std::string header = fmt::format("  {:<70} {:>13} {:>12} {:>10} {:>7} {:>10}\n", "layout",
                                   "memory/rank", "step", "tok/s/dev", "MFU", "$/Mtok");
  if (search.fitting.empty())
    out += "no layout fits\n";
  else
    out += "best fitting layouts:\n" + header;
  for (size_t i = 0; i < search.fitting.size() && int64_t(i) < top; ++i)
    out += row(search.fitting[i]);
  if (!search.notFitting.empty())
    out += "best layouts that do not fit, and why:\n";
  for (size_t i = 0; i < search.notFitting.size() && int64_t(i) < top; ++i) {
    const SearchResult &r = search.notFitting[i];
    out += fmt::format("  {}: {}\n", r.candidate.describe(), r.whyNot);
  }
  return out;
}

nlohmann::json searchToJson(const LayoutSearch &search, int64_t top) {
  using nlohmann::json;
  auto entry = [](const SearchResult &r) {
    const SearchCandidate &c = r.candidate;
    json j = {{"dp_replicate", c.dpReplicate},
              {"dp_shard", c.dpShard},
              {"tp", c.tp},
              {"ep", c.ep},
              {"cp", c.cp},
              {"sequence_parallel", c.sequenceParallel},
              {"activation_checkpoint", {{"mode", wordOf(c.checkpointing.mode)}}},
              {"local_batch_size", c.localBatchSize},
              {"fits", r.fits()}};
    if (c.checkpointing.mode == CheckpointMode::Selective)
      j["activation_checkpoint"]["selective_ac_option"] = c.checkpointing.selectiveAcOption;
    if (c.pp > 1) {
      j["pp"] = c.pp;
      j["pipeline_schedule"] = wordOf(c.schedule);
      j["pipeline_microbatch_size"] = c.microbatchSize;
    }
    if (!r.fits())
      j["why_not"] = r.whyNot;
    if (r.plan) {
      j["memory_per_rank_bytes"] = r.plan->deviceBytes;
      j["step_seconds"] = r.plan->stepSeconds;
      j["tokens_per_second_per_device"] = r.plan->tokensPerSecondPerDevice;
      j["mfu"] = r.plan->mfu;
      j["usd_per_million_tokens"] = r.plan->usdPerMillionTokens;
    }
    return j;
  };
  json fitting = json::array(), notFitting = json::array();
  for (size_t i = 0; i < search.fitting.size() && int64_t(i) < top; ++i)
    fitting.push_back(entry(search.fitting[i]));
  for (size_t i = 0; i < search.notFitting.size() && int64_t(i) < top; ++i)
    notFitting.push_back(entry(search.notFitting[i]));
  return json{{"search_by", searchObjectiveName(search.objective)},
              {"layouts_planned", search.planned},
              {"layouts_pruned", search.pruned},
              {"layouts_fitting", search.fitting.size()},
              {"search_seconds", search.seconds},
              {"fitting", fitting},
              {"not_fitting", notFitting}};
}

} // namespace kiln
