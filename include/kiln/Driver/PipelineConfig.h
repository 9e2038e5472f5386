//===- PipelineConfig.h - A run config as pipeline options ------*- C++ -*-===//
//
// The one place a run config becomes the compile's options: every command
// (train, eval, plan, compile, capture) fills KilnPipelineOptions here.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_DRIVER_PIPELINECONFIG_H
#define KILN_DRIVER_PIPELINECONFIG_H

#include "kiln/Driver/ParallelLayout.h"
#include "kiln/Driver/TrainConfig.h"
#include "kiln/Pipeline/KilnPipeline.h"

#include "mlir/IR/BuiltinOps.h"

#include <memory>

namespace kiln {

/// The pipeline options of a run: `config`'s optimizer and LR schedule,
/// override rules and target, activation checkpointing and mixed precision
/// (`defaultParamDtype` where training.mixed_precision_param is unset, and
/// `defaultTarget` where target.name is: the command's defaults), and `layout`'s parallelism with
/// torchtitan's tensor-parallel plan for `model` (one rank when `layout` is null). Throws
/// kiln::Error for an override rule that does not parse.
std::unique_ptr<KilnPipelineOptions>
pipelineOptions(const TrainConfig &config, const Qwen3Config &model, const ParallelLayout *layout,
                PrecisionDtype defaultParamDtype = PrecisionDtype::Float32,
                TargetName defaultTarget = TargetName::Trn2);

/// The learning rate of the 0-based update `step` under `options`' schedule
/// (what kiln-optimizer's step computes).
double learningRateAt(const KilnPipelineOptions &options, int64_t step);

/// Runs the pipeline from stage `from` to `to` on `module`; throws kiln::Error
/// "<what>:" with the diagnostics if a pass fails.
void runKilnPipeline(mlir::ModuleOp module, const KilnPipelineOptions &options, LoweringStage to,
                     LoweringStage from, const std::string &what);

} // namespace kiln

#endif // KILN_DRIVER_PIPELINECONFIG_H
