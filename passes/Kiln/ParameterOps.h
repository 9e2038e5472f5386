//===- ParameterOps.h - Ops of parameters alone -------------------*- C++ -*-===//
//
// Ops computed from a function's parameters alone (the rope cache, a
// weight's bf16 cast) are cheap to compute again and as large as a weight
// to carry: kiln-pipeline-split clones them into each stage that uses them,
// and a stage's backward computes them again rather than keeping them per
// microbatch.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_PASSES_KILN_PARAMETEROPS_H
#define KILN_PASSES_KILN_PARAMETEROPS_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseSet.h"

namespace kiln {

/// The ops of `ops` (in program order) whose operands are all parameters
/// of `fn` (kiln.param arguments) or results of such ops; an op without
/// operands is one.
llvm::DenseSet<mlir::Operation *> opsOfParametersAlone(mlir::func::FuncOp fn,
                                                       llvm::ArrayRef<mlir::Operation *> ops);

} // namespace kiln

#endif // KILN_PASSES_KILN_PARAMETEROPS_H
