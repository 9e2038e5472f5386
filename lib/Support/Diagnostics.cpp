//===- Diagnostics.cpp - MLIR diagnostics as kiln::Error ------------------===//

#include "kiln/Support/Diagnostics.h"
#include "kiln/Support/Error.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"

using namespace mlir;

namespace kiln {

void succeedOrFail(MLIRContext &context, const std::string &what,
                   llvm::function_ref<LogicalResult()> step) {
  std::string messages;
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diag) {
    messages += "\n  " + diag.str();
    return success();
  });
  if (failed(step()))
    fail("{}:{}", what, messages);
}

void verifyOrFail(ModuleOp module, const std::string &what) {
  succeedOrFail(*module.getContext(), what + " does not verify",
                [&] { return verify(module); });
}

} // namespace kiln
