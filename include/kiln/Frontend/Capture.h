//===- Capture.h - Qwen3 -> kiln dialect ------------------------*- C++ -*-===//
//
// Builds the kiln IR of a Qwen3 model with MLIR's builders. The module holds
//   func @forward(tokens [b, s], params...) -> logits [b, s, vocab]
//   func @loss(tokens [b, s+1], params...) -> scalar mean cross-entropy of
//              logits(tokens[:, :-1]) against tokens[:, 1:]
// Parameters are function arguments tagged `kiln.param = <HF key>`; shapes
// are static and nothing is allocated for weights.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_FRONTEND_CAPTURE_H
#define KILN_FRONTEND_CAPTURE_H

#include "kiln/Frontend/Qwen3Config.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

namespace kiln {

struct CaptureOptions {
  int64_t batch = 1;
  int64_t seq = 0; ///< 0: min(2048, max_position_embeddings)
};

/// Captures `config`; throws kiln::Error for unusable shapes (e.g. a sequence
/// longer than max_position_embeddings).
mlir::OwningOpRef<mlir::ModuleOp> captureQwen3(mlir::MLIRContext &context,
                                               const Qwen3Config &config,
                                               const CaptureOptions &options);

/// Runs `step`, collecting the diagnostics it emits in `context`; if it
/// fails, throws kiln::Error "<what>:" followed by every diagnostic.
void succeedOrFail(mlir::MLIRContext &context, const std::string &what,
                   llvm::function_ref<mlir::LogicalResult()> step);

/// Throws kiln::Error with every diagnostic if `module` does not verify.
void verifyOrFail(mlir::ModuleOp module, const std::string &what);

/// Registers and loads the dialects captured IR uses.
void loadKilnDialects(mlir::MLIRContext &context);

} // namespace kiln

#endif // KILN_FRONTEND_CAPTURE_H
