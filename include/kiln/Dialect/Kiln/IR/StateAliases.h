//===- StateAliases.h - The state a step updates, and where ----*- C++ -*-===//
//
// A training step returns the new value of each parameter and piece of
// optimizer state it takes: the result and the argument of one name
// (kiln.param / kiln.state). The Neuron artifact must-aliases them
// (input_output_alias); compiled mode writes the new state into the old
// state's buffer where the lowered code allows it. Two function attributes
// carry the pairs through the lowering, after the role attributes are gone
// (kiln-convert-hlo-to-linalg strips them: bufferization turns results into
// arguments, where the names would repeat). The dialect verifies both.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_DIALECT_KILN_IR_STATEALIASES_H
#define KILN_DIALECT_KILN_IR_STATEALIASES_H

#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/ADT/SmallVector.h"

namespace kiln {
/// Function attribute (array<i64>), one entry per result: the argument whose
/// state the result updates, -1 for none. Set by kiln-convert-hlo-to-linalg,
/// consumed by kiln-compact-buffers (after buffer-results-to-out-params the
/// entries are the trailing out-parameters').
inline constexpr llvm::StringLiteral kInputOutputAliasAttr = "kiln.input_output_alias";
/// Function attribute (array<i64>), one entry per out-parameter (the last
/// arguments, in result order): an argument whose buffer the caller may pass
/// as that out-parameter, the code reading the argument at or before its
/// first write of the out-parameter; -1 for none. Set by kiln-compact-buffers,
/// read by compiled mode's runner.
inline constexpr llvm::StringLiteral kOutParamBuffersAttr = "kiln.out_param_buffers";

/// For each result of `fn`, the argument holding the same parameter or
/// piece of optimizer state (kiln.param or kiln.state of the same name), or
/// -1.
llvm::SmallVector<int64_t> updatedArguments(mlir::FunctionOpInterface fn);
} // namespace kiln

#endif // KILN_DIALECT_KILN_IR_STATEALIASES_H
