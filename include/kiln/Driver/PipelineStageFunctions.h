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
#include <set>
#include <string>

namespace kiln {

struct PrecisionPolicy;

/// `@loss_stage<s>`, `_forward` and `_backward` of every stage of `layout`
/// for a microbatch of `layout.microbatchSize` rows of `seq` tokens, after
/// the Forward part of the pipeline and buildPipelineStagesPipeline under
/// `options` (bf16 casts included). With a layout of several ranks in
/// `options` (FSDP, TP, EP inside a stage) the stages are partitioned on the run's
/// grid for a microbatch of that many rows on every data-parallel rank.
/// Throws kiln::Error with the diagnostics if a pass fails.
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
/// With `precision`, each at the width the target keeps it in
/// (ValuePrecision).
struct StageFootprint {
  int64_t sentBytes = 0, residualBytes = 0;
  std::map<std::string, int64_t> parameterBytes;
};
std::vector<StageFootprint> stageFootprints(mlir::ModuleOp module, int64_t numStages,
                                            const PrecisionPolicy *precision = nullptr);

/// The pipeline ranks whose stages use each parameter (stage s on rank
/// s mod `pp`, from the stages' backwards' kiln.grad results) and its type,
/// by HF key: a tied table has two.
struct ParameterUsers {
  std::set<int64_t> ranks;
  mlir::Type type;
};
std::map<std::string, ParameterUsers> pipelineRanksUsing(mlir::ModuleOp module, int64_t numStages,
                                                         int64_t pp);

/// Adds pipeline rank `pipelineRank`'s update to `module` (holding the
/// stage functions) as @train_step (buildPipelineUpdatePipeline), on the
/// run's grid `gridShape` with axes `axisNames` (pp first): its gradient
/// norm all-reduced over pp, its gradients over `replicaAxes`, the mean
/// over `microbatches` (every microbatch of every schedule run and
/// replica). Throws kiln::Error with the diagnostics if a pass fails.
mlir::func::FuncOp addPipelineUpdate(mlir::ModuleOp module, const KilnPipelineOptions &options,
                                     int64_t microbatches, int64_t pp, int64_t pipelineRank,
                                     llvm::ArrayRef<int64_t> gridShape,
                                     llvm::ArrayRef<std::string> axisNames,
                                     llvm::ArrayRef<int64_t> replicaAxes);

} // namespace kiln

#endif // KILN_DRIVER_PIPELINESTAGEFUNCTIONS_H
