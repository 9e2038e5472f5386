//===- Passes.h - Kiln's passes ---------------------------------*- C++ -*-===//
//
// Declarations generated from passes/Passes.td: create<Name>() and
// create<Name>(const <Name>Options &) for every pass, and registerKilnPasses().
// The pipeline built from them is kiln/Pipeline/KilnPipeline.h.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_PASSES_H
#define KILN_PASSES_H

#include "kiln/Dialect/Hlo/IR/HloOps.h"
#include "kiln/Dialect/Kiln/IR/KernelSpec.h"
#include "kiln/Dialect/Kiln/IR/KilnDialect.h"
#include "kiln/OverrideRules.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

#include <memory>

namespace kiln {

#define GEN_PASS_DECL
#include "passes/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "passes/Passes.h.inc"

/// kiln-substitute-kernels with rules given as data (the driver's, from the
/// run config), in addition to any rule files `options` name.
std::unique_ptr<mlir::Pass> createSubstituteKernels(std::vector<OverrideRule> rules,
                                                    const SubstituteKernelsOptions &options);

/// Reverse-mode differentiation over `forward` (ops in program order) at the
/// builder's insertion point: from the cotangents `seeds` (value, cotangent)
/// builds every VJP and returns the cotangent of each of `wrt` (null where
/// none flows). Sums of cotangents are named `<owner>.grad_accum`.
/// kiln-autodiff and kiln check-kernel both differentiate with it.
mlir::FailureOr<llvm::SmallVector<mlir::Value>>
buildReverseMode(mlir::OpBuilder &b, llvm::ArrayRef<mlir::Operation *> forward,
                 llvm::ArrayRef<std::pair<mlir::Value, mlir::Value>> seeds, mlir::ValueRange wrt);

} // namespace kiln

#endif // KILN_PASSES_H
