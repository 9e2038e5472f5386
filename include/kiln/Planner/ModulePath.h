//===- ModulePath.h - The layer or top-level module of an fqn ----*- C++ -*-===//
#ifndef KILN_PLANNER_MODULEPATH_H
#define KILN_PLANNER_MODULEPATH_H

#include "mlir/IR/Value.h"

#include <string>

namespace kiln {

/// The unit the planner groups by: "layers.N" for anything under a
/// transformer block, else the fqn's first component ("tok_embeddings",
/// "norm", "output", "loss", "optimizer"); "" for an empty fqn.
std::string moduleKey(llvm::StringRef fqn);

/// moduleKey of the module a value belongs to: its defining op's fqn (a
/// collective, which has none, takes its operand's), or for an argument the
/// fqn of its first user (kiln::owningModule).
std::string moduleKeyOf(mlir::Value value);

} // namespace kiln

#endif // KILN_PLANNER_MODULEPATH_H
