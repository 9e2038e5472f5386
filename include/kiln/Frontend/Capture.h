//===- Capture.h - Qwen3 -> kiln dialect ------------------------*- C++ -*-===//
//
// Builds the kiln IR of a Qwen3 model with MLIR's builders. The module holds
//   func @forward(input_ids [b, s], params...) -> logits [b, s, vocab]
//   func @loss(input_ids [b, s], labels [b, s], params...) -> scalar mean
//              cross-entropy of logits(input_ids) against labels
// Inputs are tagged `kiln.input = "input_ids"` / `"labels"`; the host splits
// token windows [b, s+1] into the two (splitInputsAndLabels).
// Parameters are function arguments tagged `kiln.param = <HF key>`; shapes
// are static and nothing is allocated for weights.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_FRONTEND_CAPTURE_H
#define KILN_FRONTEND_CAPTURE_H

#include "kiln/Frontend/Qwen3Config.h"
#include "kiln/Support/Diagnostics.h"

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

/// Registers and loads the dialects captured IR uses.
void loadKilnDialects(mlir::MLIRContext &context);

} // namespace kiln

#endif // KILN_FRONTEND_CAPTURE_H
