//===- PipelinePlanning.h - Plan a pipelined training run ---------*- C++ -*-===//
//
// `kiln plan` under pipeline parallelism, from the programs the run executes:
// the stage functions of one microbatch (PipelineStageFunctions.h) and each
// pipeline rank's update, each planned on the target (planStep); the
// schedule (Config/PipelineSchedule.h) simulated with the stages' forward
// and backward times and the transfers' time, so the bubble is the
// schedule's own; the step is its runs (gradient accumulation) one after
// another, then the slowest rank's update. A rank's memory is the larger of
// its update's peak and, during the schedule, its parameters, gradients
// and moments (the update's arguments) plus the activations it holds at its
// peak under the schedule (peakHeldBytes) plus the largest of its running
// stage's own buffers (a stage program's peak less its arguments).
//
//===----------------------------------------------------------------------===//
#ifndef KILN_DRIVER_PIPELINEPLANNING_H
#define KILN_DRIVER_PIPELINEPLANNING_H

#include "kiln/Driver/Planning.h"

namespace kiln {

/// Plans `run` (resolvePlannedRun's, pipeline_parallel_degree > 1) on
/// `target`: memory and collectives of its largest pipeline rank, the
/// step's time and StepPlan::pipeline. Throws kiln::Error naming the
/// options for FSDP, TP or EP inside a stage (not built yet) and anything
/// the capture or the schedule refuses.
StepPlan planPipelinedRun(const PlannedRun &run, const TargetProfile &target,
                          mlir::TimingScope *timing = nullptr);

} // namespace kiln

#endif // KILN_DRIVER_PIPELINEPLANNING_H
