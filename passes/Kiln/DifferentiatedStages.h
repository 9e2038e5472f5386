//===- DifferentiatedStages.h - A pipeline's stage functions ------*- C++ -*-===//
//
// The functions kiln-autodiff pipeline-stages makes, one per pipeline stage
// (`@loss_stage<s>_grad`, kiln.stage = s): what kiln-activation-checkpoint,
// kiln-shard and kiln-partition take with pipeline stages and
// kiln-stage-forward-backward cuts.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_PASSES_KILN_DIFFERENTIATEDSTAGES_H
#define KILN_PASSES_KILN_DIFFERENTIATEDSTAGES_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/SmallVector.h"

namespace kiln {

/// `module`'s functions tagged kiln.stage and named ..._grad, in module order.
llvm::SmallVector<mlir::func::FuncOp> differentiatedStages(mlir::ModuleOp module);

/// What a pass that takes either one function or every stage works on:
/// differentiatedStages with `stages`, else @`funcName`; empty when there
/// is none (the pass says why).
llvm::SmallVector<mlir::func::FuncOp> stagesOrFunction(mlir::ModuleOp module, bool stages,
                                                       llvm::StringRef funcName);

} // namespace kiln

#endif // KILN_PASSES_KILN_DIFFERENTIATEDSTAGES_H
