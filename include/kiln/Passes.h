//===- Passes.h - Kiln's passes ---------------------------------*- C++ -*-===//
//
// Declarations generated from passes/Passes.td: create<Name>() and
// create<Name>(const <Name>Options &) for every pass, and registerKilnPasses().
//
//===----------------------------------------------------------------------===//
#ifndef KILN_PASSES_H
#define KILN_PASSES_H

#include "kiln/Dialect/Kiln/IR/KilnDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

#include <memory>

namespace kiln {

/// Result attribute naming the parameter a gradient belongs to.
inline constexpr llvm::StringLiteral kGradAttr = "kiln.grad";
/// Argument/result attribute naming a piece of optimizer state.
inline constexpr llvm::StringLiteral kStateAttr = "kiln.state";
/// Forward-op attribute listing the results the backward reads.
inline constexpr llvm::StringLiteral kSavedAttr = "kiln.saved";

#define GEN_PASS_DECL
#include "passes/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "passes/Passes.h.inc"

} // namespace kiln

#endif // KILN_PASSES_H
