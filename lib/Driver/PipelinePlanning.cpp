//===- PipelinePlanning.cpp - Plan a pipelined training run ---------------===//

#include "kiln/Driver/PipelinePlanning.h"
#include "kiln/Config/PipelineSchedule.h"
#include "kiln/Dialect/Kiln/IR/KilnDialect.h"
#include "kiln/Driver/PipelineConfig.h"
#include "kiln/Driver/PipelineStageFunctions.h"
#include "kiln/Pipeline/KilnPipeline.h"
#include "kiln/Planner/Collective.h"
#include "kiln/Planner/StepSchedule.h"
#include "kiln/Support/Error.h"

#include "mlir/IR/MLIRContext.h"

#include <fmt/format.h>

#include <algorithm>

namespace kiln {

namespace {

/// Where the pipeline's neighbours sit: ranks one pp coordinate apart; when
/// the pp group spans nodes some pair crosses the network, and the slowest
/// pair sets the schedule's pace, so every transfer is taken to cross it.
GroupPlacement neighbourPlacement(const ParallelLayout &layout, const TargetProfile &target) {
  int64_t stride = layout.worldSize() / layout.pp;
  if (placeGroup(layout.shape(), {0}, target).nodes > 1)
    return GroupPlacement{2, 1, 1};
  return placeGroup({2, stride}, {0}, target);
}

/// A backward's gradients summed into its rank's over the microbatches (as
/// PipelineStageExecutor sums them): per gradient an elementwise add that
/// reads the sum and the gradient and writes the sum, at the reduce width.
double accumulationSeconds(mlir::func::FuncOp backward, const TargetProfile &target) {
  double seconds = 0;
  for (unsigned i = 0; i < backward.getNumResults(); ++i)
    if (backward.getResultAttr(i, kGradAttr)) {
      int64_t elements =
          mlir::cast<mlir::RankedTensorType>(backward.getResultTypes()[i]).getNumElements();
      seconds += rooflineSeconds(double(elements), 3 * elements * target.precision.reduceBytes,
                                 OpClass::Vector, target);
    }
  return seconds;
}

void addTotals(CollectiveTotals &into, const CollectiveTotals &add, int64_t times = 1) {
  into.count += add.count * times;
  into.bytesSent += add.bytesSent * times;
  into.seconds += add.seconds * double(times);
  into.twoLevel += add.twoLevel * times;
}

} // namespace

StepPlan planPipelinedRun(const PlannedRun &run, const TargetProfile &target,
                          mlir::TimingScope *timing) {
  const TrainConfig &train = run.config;
  const ParallelLayout &layout = run.layout;
  // Several ranks to a stage (FSDP, HSDP, TP, EP inside it): the stages
  // are planned partitioned on the run's grid.
  ParallelLayout inner = layout;
  inner.pp = 1;
  const bool partitioned = inner.worldSize() > 1;
  const int64_t pp = layout.pp;
  PipelineSchedule schedule = layout.pipelineSchedule(train.training.localBatchSize);
  const int64_t runs = train.training.microbatches(layout.dataParallelDegree());
  const int64_t numStages = schedule.numStages();

  // A stage's layout is the run's without its pipeline axis (buildPipeline-
  // StagesPipeline puts pp in the grid).
  std::unique_ptr<KilnPipelineOptions> options =
      pipelineOptions(train, run.model, partitioned ? &inner : nullptr);
  // As planTrainingRun: the float32 program, sized at the target's precision.
  options->paramDtype = PrecisionDtype::Float32;
  options->timing = timing;
  mlir::MLIRContext context;
  mlir::OwningOpRef<mlir::ModuleOp> module =
      captureStageFunctions(context, run.model, layout, train.training.seqLen, *options);

  PipelineFigures figures;
  figures.schedule = wordOf(schedule.kind);
  figures.degree = pp;
  figures.stagesPerRank = schedule.stagesPerRank;
  figures.microbatches = schedule.microbatches;
  figures.scheduleRuns = runs;

  // Each stage's forward and backward of one microbatch.
  std::vector<StepPlan> forwards, backwards;
  std::vector<double> accumulate;
  for (int64_t s = 0; s < numStages; ++s) {
    forwards.push_back(planStep(stageFunction(*module, s, "forward"), target, run.setting, timing));
    backwards.push_back(
        planStep(stageFunction(*module, s, "backward"), target, run.setting, timing));
    figures.forwardSeconds.push_back(forwards.back().stepSeconds);
    accumulate.push_back(accumulationSeconds(stageFunction(*module, s, "backward"), target));
    figures.backwardSeconds.push_back(backwards.back().stepSeconds + accumulate.back());
  }
  std::vector<StageFootprint> footprints = stageFootprints(*module, numStages, &target.precision);
  std::vector<int64_t> residualBytes;
  for (const StageFootprint &f : footprints) {
    figures.transferBytes = std::max(figures.transferBytes, f.sentBytes);
    residualBytes.push_back(f.residualBytes);
  }
  GroupPlacement neighbours = neighbourPlacement(layout, target);
  figures.transferSeconds = sendSeconds(figures.transferBytes, neighbours, target);
  PipelineTimeline timeline =
      simulate(schedule, figures.forwardSeconds, figures.backwardSeconds, figures.transferSeconds);
  figures.makespanSeconds = timeline.makespan;
  figures.bubbleFraction = timeline.bubbleFraction;
  figures.timeline = timeline;
  std::vector<int64_t> held = peakHeldBytes(schedule, residualBytes);

  // Each pipeline rank's update, on a copy of the stage functions; the
  // gradients of a parameter several ranks use (a tied table) are summed
  // between them first, each sending its own to the other at once.
  std::map<std::string, ParameterUsers> users = pipelineRanksUsing(*module, numStages, pp);
  // Replicas of an unpartitioned pipeline sum their gradients in the
  // update; partitioned stages reduce them over every data-parallel axis in
  // their backwards, each microbatch's loss the mean over all its rows.
  std::vector<int64_t> replicaAxes;
  if (layout.dpReplicate > 1 && !partitioned)
    replicaAxes.push_back(1); // [pp, dp_replicate, ...]
  const int64_t replicas = partitioned ? 1 : layout.dpReplicate;
  StepPlan largest;
  std::vector<double> computeSeconds(pp, 0), flops(pp, 0);
  for (int64_t r = 0; r < pp; ++r) {
    mlir::OwningOpRef<mlir::ModuleOp> copy = module->clone();
    mlir::func::FuncOp update =
        addPipelineUpdate(*copy, *options, schedule.microbatches * runs * replicas, pp, r,
                          layout.shape(), layout.axisNames(), replicaAxes);
    StepPlan rank = planStep(update, target, run.setting, timing);
    double shared = 0;
    int64_t sharedBytes = 0, sharedCount = 0;
    for (const auto &[key, u] : users)
      if (u.ranks.size() > 1 && u.ranks.count(r)) {
        auto type = mlir::cast<mlir::RankedTensorType>(u.type);
        int64_t bytes = type.getNumElements() * int64_t(type.getElementTypeBitWidth() / 8);
        shared += sendSeconds(bytes, neighbours, target);
        sharedBytes += bytes;
        ++sharedCount;
      }
    figures.updateSeconds.push_back(rank.stepSeconds + shared);

    // The rank's compute and sends over the step.
    CollectiveTotals sends;
    // The stages' own collectives (FSDP's gathers and scatters), every run.
    std::map<std::pair<std::string, std::string>, CollectiveTotals> stageCollectives;
    double recompute = 0, recomputeFlops = 0;
    for (const PipelineAction &a : schedule.ranks[r]) {
      const StepPlan *stage = a.kind == PipelineActionKind::Forward    ? &forwards[a.stage]
                              : a.kind == PipelineActionKind::Backward ? &backwards[a.stage]
                                                                       : nullptr;
      if (stage) {
        computeSeconds[r] += double(runs) * stage->schedule.computeSeconds;
        if (a.kind == PipelineActionKind::Backward)
          computeSeconds[r] += double(runs) * accumulate[a.stage];
        flops[r] += double(runs) * stage->schedule.flops;
        recompute += double(runs) * stage->schedule.recomputeSeconds;
        recomputeFlops += double(runs) * stage->schedule.recomputeFlops;
        for (const auto &[key, totals] : stage->collectives)
          addTotals(stageCollectives[key], totals, runs);
      } else if (a.kind == PipelineActionKind::SendActivation ||
                 a.kind == PipelineActionKind::SendGradient) {
        sends.count += runs;
        sends.bytesSent += runs * figures.transferBytes;
        sends.seconds += double(runs) * figures.transferSeconds;
      }
    }
    if (sharedBytes > 0)
      addTotals(sends, {sharedCount, sharedBytes, shared, 0});
    computeSeconds[r] += rank.schedule.computeSeconds;
    flops[r] += rank.schedule.flops;

    // Memory: the update's peak, or the schedule's.
    const MemoryPlan &u = rank.memory;
    int64_t transient = 0;
    for (int64_t s : layout.stages.stagesOf(r))
      for (const StepPlan *stage : {&forwards[s], &backwards[s]})
        transient = std::max(transient, stage->memory.peakBytes - stage->memory.argumentBytes);
    int64_t during = u.argumentBytes + held[r] + transient;
    MemoryPlan memory = u;
    if (during > u.peakBytes) {
      memory.peakByCategory = {};
      memory.peakByCategory[size_t(MemoryCategory::Parameters)] = u.parameterBytes;
      memory.peakByCategory[size_t(MemoryCategory::OptimizerState)] = u.stateBytes;
      memory.peakByCategory[size_t(MemoryCategory::Gradients)] =
          u.argumentBytes - u.parameterBytes - u.stateBytes;
      memory.peakByCategory[size_t(MemoryCategory::Activations)] = held[r];
      memory.peakByCategory[size_t(MemoryCategory::Temporaries)] = transient;
      memory.peakBytes = during;
      memory.topContributors.clear();
      memory.peakByModule.clear();
      rank.peakAt =
          fmt::format("the schedule: activations of {} microbatch{} held, a stage "
                      "running",
                      timeline.peakInFlight[r], timeline.peakInFlight[r] == 1 ? "" : "es");
    }
    memory.savedActivationBytes = held[r];
    figures.peakBytes.push_back(memory.peakBytes);
    if (r == 0 || memory.peakBytes > largest.memory.peakBytes) {
      figures.largestRank = r;
      rank.memory = memory;
      rank.collectives[{"send", "pp"}] = sends;
      for (const auto &[key, totals] : stageCollectives)
        addTotals(rank.collectives[key], totals);
      rank.schedule.recomputeSeconds += recompute;
      rank.schedule.recomputeFlops += recomputeFlops;
      largest = std::move(rank);
    }
  }

  StepPlan plan = std::move(largest);
  // The busiest rank's compute; the step: the schedule runs, then the
  // slowest update (its norm's all-reduce over pp waits for every rank).
  figures.computeSeconds = computeSeconds;
  figures.flops = flops;
  auto busiest = std::max_element(computeSeconds.begin(), computeSeconds.end());
  plan.schedule.computeSeconds = *busiest;
  plan.schedule.flops = flops[busiest - computeSeconds.begin()];
  plan.schedule.communicationSeconds = 0;
  for (const auto &[key, totals] : plan.collectives)
    plan.schedule.communicationSeconds += totals.seconds;
  plan.schedule.seconds =
      double(runs) * figures.makespanSeconds +
      *std::max_element(figures.updateSeconds.begin(), figures.updateSeconds.end());
  plan.schedule.ops.clear(); // no one program's timeline: the schedule's
  plan.pipeline = std::move(figures);
  completePlan(plan);
  return plan;
}

} // namespace kiln
