//===- StepPlan.h - A training step planned on a target ----------*- C++ -*-===//
//
// The planner's answer for one per-rank program on one target: memory per
// rank by category against the target's memory, the predicted step
// (StepSchedule), throughput, TFLOPS and MFU by torchtitan's formula, the
// price of a million tokens and the traffic of every collective kind and
// axis. Plain data: nothing refers back to the IR, so it outlives the module.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_PLANNER_STEPPLAN_H
#define KILN_PLANNER_STEPPLAN_H

#include "kiln/Config/PipelineSchedule.h"
#include "kiln/Planner/MemoryPlan.h"
#include "kiln/Planner/StepSchedule.h"
#include "kiln/Planner/TargetProfile.h"

#include "mlir/Support/Timing.h"

#include <nlohmann/json.hpp>

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace kiln {

/// What the planner needs to know of the job beyond its per-rank program.
struct PlanSetting {
  std::string model;          ///< "qwen3-4b"
  int64_t parameters = 0;     ///< of the whole model
  double flopsPerToken = 0;   ///< torchtitan: 6 N + 12 L H Q T
  /// NxDT's count (ModelFlops.h), for its MFU; 0 where it does not apply.
  double nxdtFlopsPerToken = 0;
  /// torchtitan's count before its PR 1923 (ModelFlops.h), which published
  /// Qwen3 MFU figures of 2025 use; --validate compares under it.
  double torchtitanBefore1923FlopsPerToken = 0;
  int64_t tokensPerStep = 0;  ///< the global batch, in tokens
  int64_t nodes = 1;
  /// The ranks of the run: every rank of its nodes, or part of one node (0:
  /// the nodes' ranks). The nodes are billed whole.
  int64_t worldSize = 0;
  std::string layout;         ///< "dp_replicate 1 x dp_shard 64 x tp 1"
};

struct CollectiveTotals {
  int64_t count = 0;
  int64_t bytesSent = 0; ///< per rank
  double seconds = 0;    ///< on the communication stream
  int64_t twoLevel = 0;  ///< of count, those run by the two-level algorithm
};

/// A step under pipeline parallelism (StepPlan::pipeline): the schedule's
/// run timed from its stage programs, and what each pipeline rank holds.
struct PipelineFigures {
  std::string schedule; ///< "1F1B"
  int64_t degree = 1, stagesPerRank = 1;
  /// Microbatches of one schedule run, and the runs of a step (its
  /// gradient accumulation).
  int64_t microbatches = 1, scheduleRuns = 1;
  /// Per stage, one microbatch's forward and backward (their planned steps).
  std::vector<double> forwardSeconds, backwardSeconds;
  /// The largest activation or cotangent a stage sends, and its time.
  int64_t transferBytes = 0;
  double transferSeconds = 0;
  double makespanSeconds = 0; ///< one schedule run
  double bubbleFraction = 0;  ///< of one schedule run (simulate)
  /// Per pipeline rank: its update (with the gradient norm over pp and the
  /// tied gradients summed between ranks), its compute over the step (its
  /// stages' forwards and backwards and its update) and its peak memory.
  std::vector<double> updateSeconds, computeSeconds;
  std::vector<double> flops; ///< per pipeline rank over the step
  std::vector<int64_t> peakBytes;
  /// The pipeline rank whose memory the plan reports (the largest).
  int64_t largestRank = 0;
  /// One schedule run as simulated: each rank's actions in time.
  PipelineTimeline timeline;
};

struct StepPlan {
  PlanSetting setting;
  TargetProfile target;
  int64_t worldSize = 1;

  MemoryPlan memory;        ///< at the target's precision (peakOp cleared)
  std::string peakAt;       ///< the op after which the peak is reached
  int64_t totalBytes = 0;   ///< the peak plus the runtime reserve
  /// As the device sees it: the peak with the allocator's overhead, plus the
  /// runtime reserve (totalBytes where the target has no overhead).
  int64_t deviceBytes = 0;
  bool fits = false;        ///< deviceBytes <= the target's memory per rank

  StepSchedule schedule;
  double stepSeconds = 0;
  /// Step time the communication stream adds beyond the compute stream's
  /// busy time: communication not hidden behind compute (plus compute
  /// waiting for it).
  double exposedCommunicationSeconds = 0;
  double tokensPerSecondPerDevice = 0; ///< a device is a rank
  double tflopsPerDevice = 0;          ///< flopsPerToken x tokens/s per device
  double mfu = 0;                      ///< tflopsPerDevice / the matmul peak
  /// The same with NxDT's FLOP count (0: not defined for the model).
  double mfuNxdt = 0;
  double usdPerMillionTokens = 0;
  /// (kind, axes) -> totals, e.g. ("all_gather", "dp_shard").
  std::map<std::pair<std::string, std::string>, CollectiveTotals> collectives;
  /// Set under pipeline parallelism: memory and collectives are then the
  /// largest pipeline rank's, the schedule its update's.
  std::optional<PipelineFigures> pipeline;
};

/// A rank's memory as the device sees it: the live peak `peakBytes` with the
/// allocator's overhead, plus the runtime reserve (StepPlan::deviceBytes).
int64_t devicePeakBytes(int64_t peakBytes, const TargetProfile &target);

/// Plans `perRankStep` (the partitioned @train_step) on `target`; each
/// phase's time goes to `timing` and the memory plan's every acquisition to
/// `memoryTimeline` when given.
StepPlan planStep(mlir::func::FuncOp perRankStep, const TargetProfile &target,
                  const PlanSetting &setting, mlir::TimingScope *timing = nullptr,
                  std::vector<MemoryEvent> *memoryTimeline = nullptr);

/// Where a memory plan's peak is reached, as StepPlan::peakAt says it: the
/// op and its fqn, or "the arguments" (null).
std::string describePeakOp(mlir::Operation *op);

/// The figures a plan derives from its memory plan, schedule, setting and
/// target: the total and device bytes, whether it fits, the step time and
/// exposed communication, throughput, TFLOPS, MFU and price (planStep's
/// last step; a plan scaled from smaller ones calls it again).
void completePlan(StepPlan &plan);

/// The plan as one JSON object (docs/planner.md lists the fields).
nlohmann::json planToJson(const StepPlan &plan);
/// A FLOP count (a double) as JSON: an integer (rounded) below 2^63, as the
/// per-rank figures of a plan always printed, a number beyond.
nlohmann::json flopsJson(double flops);

/// The human report: a memory bar per category, time, throughput, cost and
/// collectives; the top contributors when the step does not fit.
std::string formatPlan(const StepPlan &plan);
/// Bytes as the plan prints memory: "21.36 GiB".
std::string formatGib(int64_t bytes);
/// formatPlan's memory lines: memory per rank against the target's, a bar
/// per category, where the peak is and, when the step does not fit, by how
/// much and its largest buffers.
std::string formatPlanMemory(const StepPlan &plan);

/// A Chrome / Perfetto trace of the predicted step: a compute and a
/// communication track for the rank class (every rank runs the same program
/// on its own shards); a pipelined step (StepPlan::pipeline): a process per
/// pipeline rank with its forwards and backwards of every schedule run and
/// its update, and a track of its sends. Written to a temporary name, then
/// renamed.
void writeChromeTrace(const StepPlan &plan, const std::string &path);

} // namespace kiln

#endif // KILN_PLANNER_STEPPLAN_H
