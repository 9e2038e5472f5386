//===- LayerScaledPlan.h - A plan scaled from a few layers --------*- C++ -*-===//
//
// Qwen3's decoder layers are one program repeated: at a given layout each
// layer adds the same buffers, collectives and time to the per-rank step,
// and the layers' kinds (dense or sparse, checkpointed or not) repeat with a
// period. So a run's plan is an affine function of its layer count in steps
// of that period: planned on reduced copies of the model (the model's count
// modulo the period, raised to hold a whole first and last period, then one
// period more at a time until the step time grows steadily), each point of
// the memory plan and every total is scaled from the last two to the whole
// model's layer count, the peak being the largest scaled point. Memory comes
// out to the byte and time within 0.1% of the whole model's plan
// (test/unit/PlannerTest.cpp checks both on the shipped flavors), at a
// fraction of the capture and partitioning: kiln plan --search plans its
// candidates this way. The whole-model plan (planTrainingRun) stays the
// reference and the single plan's path. docs/planner.md#layout-search.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_DRIVER_LAYERSCALEDPLAN_H
#define KILN_DRIVER_LAYERSCALEDPLAN_H

#include "kiln/Driver/TrainConfig.h"
#include "kiln/Planner/StepPlan.h"
#include "kiln/Planner/TargetProfile.h"

#include "mlir/Support/Timing.h"

#include <optional>

namespace kiln {

/// The period, in layers, with which `config`'s layers repeat (the lcm of
/// the MoE decoder_sparse_step and selective checkpointing's N); nullopt
/// when they do not repeat (mlp_only_layers lists layers of their own).
std::optional<int64_t> layerPeriod(const TrainConfig &config);

/// `config`'s plan on `nodes` nodes of `target` scaled from two reduced
/// layer counts; nullopt when its layers do not repeat or are too few for
/// the reduced models to be smaller. The plan has every figure of
/// planTrainingRun's but the per-op schedule (no trace) and the split of the
/// peak by module; a layer named in its peak and largest buffers is named
/// as in the whole model (the reduced model's first period keeps its
/// indices, its later layers are the whole model's last). Throws what
/// planTrainingRun throws.
std::optional<StepPlan> planScaledFromLayers(const TrainConfig &config,
                                             const TargetProfile &target, int64_t nodes,
                                             mlir::TimingScope *timing = nullptr);

} // namespace kiln

#endif // KILN_DRIVER_LAYERSCALEDPLAN_H
