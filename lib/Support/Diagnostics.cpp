//===- Diagnostics.cpp - MLIR diagnostics as kiln::Error ------------------===//

#include "kiln/Support/Diagnostics.h"
#include "kiln/Support/Error.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"

#include <cstdio>

using namespace mlir;

namespace kiln {

void succeedOrFail(MLIRContext &context, const std::string &what,
                   llvm::function_ref<LogicalResult()> step) {
  std::string messages, warnings;
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diag) {
    messages += "\n  " + diag.str();
    if (diag.getSeverity() == DiagnosticSeverity::Warning)
      warnings += "warning: " + diag.str() + "\n";
    return success();
  });
  if (failed(step()))
    fail("{}:{}", what, messages);
  // A step that succeeded with warnings (an override rule that matched
  // nothing) still says so.
  if (!warnings.empty())
    std::fputs(warnings.c_str(), stderr);
}

void verifyOrFail(ModuleOp module, const std::string &what) {
  succeedOrFail(*module.getContext(), what + " does not verify",
                [&] { return verify(module); });
}

} // namespace kiln
