//===- ClosedSetParameter.h - A closed set in an attribute -------*- C++ -*-===//
//
// The parser of an attribute parameter that is one of the words of a closed
// set (kiln/Support/ClosedSets.h): KilnAttrs.td's Kiln_ClosedSetParameter.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_DIALECT_KILN_IR_CLOSEDSETPARAMETER_H
#define KILN_DIALECT_KILN_IR_CLOSEDSETPARAMETER_H

#include "kiln/Support/ClosedSets.h"

#include "mlir/IR/OpImplementation.h"

namespace kiln {

/// One of E's words; an error naming them all for any other keyword.
template <typename E> mlir::FailureOr<E> parseClosedSetWord(mlir::AsmParser &parser) {
  llvm::SMLoc loc = parser.getCurrentLocation();
  llvm::StringRef word;
  if (mlir::failed(parser.parseKeyword(&word)))
    return mlir::failure();
  if (std::optional<E> value = parseWord<E>(word))
    return *value;
  parser.emitError(loc) << "expected one of " << listWords<E>() << ", got '" << word << "'";
  return mlir::failure();
}

} // namespace kiln

#endif // KILN_DIALECT_KILN_IR_CLOSEDSETPARAMETER_H
