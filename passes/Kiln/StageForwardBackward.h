//===- StageForwardBackward.h - A stage's forward and backward apart -*- C++ -*-===//
//
// A pipeline schedule runs a stage's forward of a microbatch long before its
// backward, so kiln-autodiff (pipeline-stages) cuts each differentiated
// stage in two functions; the activations the backward reads travel from
// one to the other as residuals.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_PASSES_KILN_STAGEFORWARDBACKWARD_H
#define KILN_PASSES_KILN_STAGEFORWARDBACKWARD_H

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace kiln {

/// Replaces `grad`, a stage differentiated in one function whose ops
/// `forward` are the stage's own (all others its reverse mode, which alone
/// reads the kiln.cotangent arguments), by two functions after it:
/// - `@<stage>_forward`: the arguments but the cotangents, the forward ops,
///   and the results `numOwnResults` first results of `grad` (transfers, or
///   the loss and metrics) followed by the residuals: the forward values the
///   backward reads, each tagged `kiln.residual = i`;
/// - `@<stage>_backward`: the residuals (`kiln.residual = i`), the arguments
///   of `grad` the backward ops read, the cotangents; the backward ops,
///   after the forward ops of parameters alone they read (a weight's cast,
///   recomputed rather than kept per microbatch); the rest of `grad`'s
///   results (gradients, cotangents of received transfers).
/// `stageName` is the stage function's name.
void splitStageForwardBackward(mlir::func::FuncOp grad, llvm::ArrayRef<mlir::Operation *> forward,
                               unsigned numOwnResults, llvm::StringRef stageName);

} // namespace kiln

#endif // KILN_PASSES_KILN_STAGEFORWARDBACKWARD_H
