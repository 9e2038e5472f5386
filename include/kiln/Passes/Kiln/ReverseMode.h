//===- ReverseMode.h - Reverse-mode differentiation of kiln ops -*- C++ -*-===//
//
// The differentiation kiln-autodiff applies to @loss, callable on any list of
// forward ops: kiln check-kernel differentiates a kernel and its reference
// with it.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_DIALECT_KILN_TRANSFORMS_REVERSEMODE_H
#define KILN_DIALECT_KILN_TRANSFORMS_REVERSEMODE_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/Value.h"

namespace kiln {

/// Reverse-mode differentiation over `forward` (ops in program order) at the
/// builder's insertion point: from the cotangents `seeds` (value, cotangent)
/// builds every VJP and returns the cotangent of each of `wrt` (null where
/// none flows). Sums of cotangents are named `<owner>.grad_accum`.
mlir::FailureOr<llvm::SmallVector<mlir::Value>>
buildReverseMode(mlir::OpBuilder &b, llvm::ArrayRef<mlir::Operation *> forward,
                 llvm::ArrayRef<std::pair<mlir::Value, mlir::Value>> seeds, mlir::ValueRange wrt);

} // namespace kiln

#endif // KILN_DIALECT_KILN_TRANSFORMS_REVERSEMODE_H
