//===- Planning.h - Plan a training run on a target --------------*- C++ -*-===//
//
// `kiln plan` end to end: the run config's model and layout resolved for the
// target's world (ranks per node x nodes), the training step captured,
// sharded and partitioned into the per-rank program the CPU runtime would
// run, and that program planned on the target (Planner/StepPlan.h).
//
//===----------------------------------------------------------------------===//
#ifndef KILN_DRIVER_PLANNING_H
#define KILN_DRIVER_PLANNING_H

#include "kiln/Driver/ParallelLayout.h"
#include "kiln/Driver/TrainConfig.h"
#include "kiln/Planner/StepPlan.h"
#include "kiln/Planner/TargetProfile.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"

#include <memory>

namespace kiln {

/// This machine's sgemm rate, memory bandwidth and memory, for the profile
/// fields marked "measured" (the cpu target).
MachineProbe thisMachine();

/// `target` as `config` runs on it: its precision policy with the run's
/// Float8 linears (model.converters, float8.*). Fails where the run asks
/// for Float8 and the target has no Float8 rate.
TargetProfile targetForRun(const TrainConfig &config, const TargetProfile &target);

/// Plans `config` on `nodes` nodes of `target`. Throws kiln::Error for
/// nodes < 1, a parallelism.world_size other than the target's world, and
/// anything the capture or the layout refuses.
StepPlan planTrainingRun(const TrainConfig &config, const TargetProfile &target, int64_t nodes,
                         mlir::TimingScope *timing = nullptr);

/// A run resolved for the target's world, before its capture: the config
/// with the world size, the model, the layout and what the plan reports.
/// Throws kiln::Error for nodes < 1 and a parallelism.world_size other than
/// the target's world (or, on one node, fewer ranks).
struct PlannedRun {
  TrainConfig config;
  Qwen3Config model;
  ParallelLayout layout;
  PlanSetting setting;
};
PlannedRun resolvePlannedRun(const TrainConfig &config, const TargetProfile &target,
                             int64_t nodes);

/// A run captured for planning (planTrainingRun's first half): its per-rank
/// step, kept to be planned again on profiles that differ only in their
/// factors (kiln plan --fit), and what the plan reports of the run.
struct CapturedRun {
  std::unique_ptr<mlir::MLIRContext> context;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  mlir::func::FuncOp step;
  PlanSetting setting;
};
CapturedRun captureForPlanning(const TrainConfig &config, const TargetProfile &target,
                               int64_t nodes, mlir::TimingScope *timing = nullptr);

/// The built-in cpu target measured on this machine, for `ranksOnMachine`
/// ranks sharing it (as `kiln train` under mpiexec runs them): one node of
/// that many ranks, each with its share of the physical memory, of the sgemm
/// rate and of the memory bandwidth.
TargetProfile cpuTargetForRanks(int64_t ranksOnMachine);

/// The facts of `config`'s run a plan reports beside its figures (model,
/// FLOPs per token, tokens per step, layout).
PlanSetting planSetting(const TrainConfig &config, const Qwen3Config &model,
                        const ParallelLayout &layout, int64_t nodes);

} // namespace kiln

#endif // KILN_DRIVER_PLANNING_H
