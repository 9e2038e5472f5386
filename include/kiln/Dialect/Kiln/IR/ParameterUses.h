//===- ParameterUses.h - A parameter's consumers through its casts -*- C++ -*-===//
//
// kiln-mixed-precision puts a kiln.cast between a parameter and its
// consumers; what a parameter is (an embedding table, an expert's w1, ...)
// is still read from those consumers.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_DIALECT_KILN_IR_PARAMETERUSES_H
#define KILN_DIALECT_KILN_IR_PARAMETERUSES_H

#include "mlir/IR/Value.h"
#include "llvm/ADT/SmallVector.h"

namespace kiln {

/// The uses of `param`, looking through kiln.cast ops.
llvm::SmallVector<mlir::OpOperand *> parameterUses(mlir::Value param);

} // namespace kiln

#endif // KILN_DIALECT_KILN_IR_PARAMETERUSES_H
