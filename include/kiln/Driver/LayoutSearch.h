//===- LayoutSearch.h - kiln plan --search --------------------------*- C++ -*-===//
//
// Enumerates the layouts a run could take on a target (data-parallel
// replicate and shard degrees, tensor parallelism with or without sequence
// parallelism, expert parallelism for a MoE model, activation checkpointing,
// the local batch size), plans each
// one, and ranks the ones that fit by tokens/s or by $ per million tokens.
// A layout the layout rules refuse or that does not fit keeps its reason,
// so the report can say why the best of them fail.
//
// Each dimension is a list of values the enumeration crosses.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_DRIVER_LAYOUTSEARCH_H
#define KILN_DRIVER_LAYOUTSEARCH_H

#include "kiln/Driver/TrainConfig.h"
#include "kiln/Planner/StepPlan.h"
#include "kiln/Planner/TargetProfile.h"

#include "mlir/Support/Timing.h"

#include <nlohmann/json.hpp>

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace kiln {

enum class SearchObjective { TokensPerSecond, UsdPerMillionTokens };

/// "tokens_per_second" or "usd_per_million_tokens"; anything else is an
/// error naming --search-by.
SearchObjective parseSearchObjective(const std::string &name);
const char *searchObjectiveName(SearchObjective objective);

using CheckpointingChoice = TrainConfig::ActivationCheckpoint;

/// The activation-checkpointing settings of --search-ac: a comma-separated
/// list of "none", "selective" (torchtitan's "op": save the matmuls'
/// results), "selective:N" (every N-th layer) and "full". Anything else is an
/// error naming --search-ac.
std::vector<CheckpointingChoice> parseSearchCheckpointing(const std::string &list);
/// "no AC", "AC selective op", "AC selective every 2", "AC full".
std::string describeCheckpointing(const CheckpointingChoice &choice);

/// One point of the search: the settings it gives the run config.
struct SearchCandidate {
  int64_t dpReplicate = 1, dpShard = 1, tp = 1, ep = 1;
  /// Context-parallel ranks (cp 1: none), taken from the FSDP ranks.
  int64_t cp = 1;
  /// Pipeline ranks and their schedule (pp 1: none).
  int64_t pp = 1;
  PipelineScheduleKind schedule = PipelineScheduleKind::OneFOneB;
  int64_t microbatchSize = 1; ///< rows of a pipeline's microbatch
  bool sequenceParallel = false;
  CheckpointingChoice checkpointing;
  int64_t localBatchSize = 1;

  /// "dp_replicate 1 x dp_shard 64 x tp 1, AC full, local batch 2";
  /// "pp 4 (1F1B) x dp_replicate 16 x ..., local batch 8 in microbatches
  /// of 2" with a pipeline
  std::string describe() const;
  /// `base` with this candidate's parallelism, checkpointing and batch.
  TrainConfig apply(const TrainConfig &base) const;
};

struct SearchResult {
  SearchCandidate candidate;
  std::optional<StepPlan> plan; ///< absent when the layout was refused
  std::string whyNot;           ///< empty when it fits
  bool fits() const { return whyNot.empty(); }
  /// The objective's value (larger is better for tokens/s, smaller for $).
  double value(SearchObjective objective) const;
};

/// The workers a search uses by default at most (SearchOptions::workers).
inline constexpr int64_t kMaxSearchWorkers = 8;

/// The workers that plan independent runs (the search's candidates, the
/// published runs of --validate) by default: one per core, at most
/// kMaxSearchWorkers, and one where `target` times GEMMs on this machine
/// as it plans (the cpu profile), which other workers would disturb.
int64_t defaultPlanningWorkers(const TargetProfile &target);

/// How far a search is: reported after each candidate it plans.
struct SearchProgress {
  /// Parallel layouts whose checkpointings and batches are all planned, of
  /// all the search enumerates.
  int64_t layoutsDone = 0, layoutsTotal = 0;
  int64_t planned = 0, fitting = 0; ///< candidates planned, and those that fit
  const SearchResult *best = nullptr; ///< the best fitting so far (none yet: null)
  double seconds = 0;
};

/// "search: 37 of 88 layouts (219 planned, 12 fit, 3.4 s); best so far: <layout>
/// at 302.1 tokens/s per device".
std::string describeSearchProgress(const SearchProgress &progress, SearchObjective objective);

struct SearchOptions {
  SearchObjective objective = SearchObjective::TokensPerSecond;
  int64_t maxLocalBatchSize = 8; ///< powers of two from 1 up to this
  /// Expert-parallel degrees tried for a MoE model: powers of two up to this.
  /// Kiln's expert parallelism all-gathers each rank's tokens over the
  /// group, which moves no more than an all-to-all while ep <= top-k.
  int64_t maxExpertParallel = 8;
  /// Also pipeline layouts (kiln plan --search-pipeline): pp 2, 4, 8, ...
  /// up to this (0: none), each under 1F1B and Interleaved1F1B, the rest of
  /// the world replicas of the pipeline (FSDP, TP and EP inside a stage are
  /// not built yet); their local batches start at pp, each split into
  /// microbatches of 1, 2, ... rows, at least pp of them.
  int64_t maxPipelineParallel = 0;
  /// Also context-parallel layouts (kiln plan --search-max-cp): cp 2, 4, ...
  /// up to this (1: none), each taken from the FSDP ranks, dividing them,
  /// with the sequence divisible by 2 x cp (head-tail) or cp.
  int64_t maxContextParallel = 1;
  /// Tried for every layout, in this order.
  std::vector<CheckpointingChoice> checkpointing = parseSearchCheckpointing("none,selective,full");
  /// Called after each candidate is planned (kiln plan's progress line).
  std::function<void(const SearchProgress &)> onProgress;
  /// Each candidate planned from two reduced layer counts, scaled
  /// (LayerScaledPlan.h), where the model's layers repeat; false: every
  /// candidate's whole model, the reference.
  bool scaleFromLayers = true;
  /// Layouts planned side by side (0: one per core of the machine, at most
  /// kMaxSearchWorkers; the cpu target, which times GEMMs as it plans,
  /// always 1).
  int64_t workers = 0;
  /// Where each candidate's planning phases add their time (kiln plan
  /// --timing); none when null.
  mlir::TimingScope *timing = nullptr;
};

struct LayoutSearch {
  SearchObjective objective = SearchObjective::TokensPerSecond;
  std::vector<SearchResult> fitting;    ///< best first
  std::vector<SearchResult> notFitting; ///< best first: planned ones, then refused ones
  int64_t planned = 0;                  ///< layouts planned (refused ones included)
  /// Layouts not planned: parameters and optimizer state alone exceed a
  /// rank's memory (in notFitting, with why).
  int64_t pruned = 0;
  double seconds = 0;
};

/// Plans every candidate of `base` on `nodes` nodes of `target`. Larger
/// local batches of a layout and checkpointing are not planned once a smaller
/// one does not fit (memory grows with the batch); a layout the layout rules
/// refuse is planned once.
LayoutSearch searchLayouts(const TrainConfig &base, const TargetProfile &target, int64_t nodes,
                           const SearchOptions &options);

/// The `top` best fitting layouts and the `top` best that do not fit, with why.
std::string formatSearch(const LayoutSearch &search, int64_t top);
nlohmann::json searchToJson(const LayoutSearch &search, int64_t top);

} // namespace kiln

#endif // KILN_DRIVER_LAYOUTSEARCH_H
