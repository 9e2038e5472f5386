//===- Evaluate.h - Capture + bind + run a checkpoint -----------*- C++ -*-===//
//
// The eager evaluation path end to end: read config.json, capture the model
// for the batch's shape, bind the checkpoint's tensors by HF key and run the
// captured function on the CPU executor.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_DRIVER_EVALUATE_H
#define KILN_DRIVER_EVALUATE_H

#include "kiln/Runtime/Tensor.h"

#include <string>

namespace kiln {

/// Mean next-token loss of `tokens` [batch, seq + 1] under the model in
/// `modelDir` (config.json + safetensors).
float evaluateLoss(const std::string &modelDir, const Tensor &tokens);

/// Logits [batch, seq, vocab] of `ids` [batch, seq].
Tensor evaluateLogits(const std::string &modelDir, const Tensor &ids);

} // namespace kiln

#endif // KILN_DRIVER_EVALUATE_H
