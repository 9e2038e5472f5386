//===- PipelineStageFunctions.h - A microbatch's stage functions --*- C++ -*-===//
//
// Pipeline parallelism's per-stage programs as far as they are built: the
// captured loss of one microbatch cut at the layout's stages
// (kiln-pipeline-split) and each stage differentiated into its forward and
// backward (kiln-autodiff pipeline-stages), with what crosses stages and
// what each stage keeps per microbatch.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_DRIVER_PIPELINESTAGEFUNCTIONS_H
#define KILN_DRIVER_PIPELINESTAGEFUNCTIONS_H

#include "kiln/Driver/ParallelLayout.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

#include <map>
#include <string>

namespace kiln {

/// `@loss_stage<s>`, `_forward` and `_backward` of every stage of `layout`
/// for a microbatch of `layout.microbatchSize` rows of `seq` tokens, after
/// the Forward part of the pipeline and buildPipelineStagesPipeline under
/// `options` (bf16 casts included). Throws kiln::Error with the diagnostics
/// if a pass fails.
mlir::OwningOpRef<mlir::ModuleOp> captureStageFunctions(mlir::MLIRContext &context,
                                                        const Qwen3Config &model,
                                                        const ParallelLayout &layout, int64_t seq,
                                                        const KilnPipelineOptions &options);

/// `@loss_stage<stage>_<part>` of `module`, `part` "forward" or
/// "backward"; throws kiln::Error naming it when absent.
mlir::func::FuncOp stageFunction(mlir::ModuleOp module, int64_t stage, llvm::StringRef part);

/// Per stage, per microbatch: the bytes its forward sends to the next stage
/// (its kiln.transfer results; 0 for the last) and keeps for its backward
/// (its kiln.residual results, a view and its source counted once, and the
/// received activations the backward reads), at the captured types; and
/// the bytes of each parameter it reads, by HF key (a tied table in both
/// its stages).
struct StageFootprint {
  int64_t sentBytes = 0, residualBytes = 0;
  std::map<std::string, int64_t> parameterBytes;
};
std::vector<StageFootprint> stageFootprints(mlir::ModuleOp module, int64_t numStages);

} // namespace kiln

#endif // KILN_DRIVER_PIPELINESTAGEFUNCTIONS_H
