//===- Diagnostics.h - MLIR diagnostics as kiln::Error -----------*- C++ -*-===//
//
// Verification, pass pipelines and analyses report through MLIR diagnostics;
// the tools report through kiln::Error. These helpers collect the former
// into the latter.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_SUPPORT_DIAGNOSTICS_H
#define KILN_SUPPORT_DIAGNOSTICS_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"

#include <string>

namespace kiln {

/// Runs `step`, collecting the diagnostics it emits in `context`; if it
/// fails, throws kiln::Error "<what>:" followed by every diagnostic.
void succeedOrFail(mlir::MLIRContext &context, const std::string &what,
                   llvm::function_ref<mlir::LogicalResult()> step);

/// Throws kiln::Error with every diagnostic if `module` does not verify.
void verifyOrFail(mlir::ModuleOp module, const std::string &what);

} // namespace kiln

#endif // KILN_SUPPORT_DIAGNOSTICS_H
