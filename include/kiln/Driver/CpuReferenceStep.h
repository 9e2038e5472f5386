//===- CpuReferenceStep.h - check-hlo's reference step ----------*- C++ -*-===//
#ifndef KILN_DRIVER_CPUREFERENCESTEP_H
#define KILN_DRIVER_CPUREFERENCESTEP_H

#include "kiln/Driver/Training.h"

#include <nlohmann/json.hpp>

namespace kiln {

/// One CPU rank's training step on the whole batch that a kiln compile
/// folder's `manifest` describes ("batch": global rows and seq_len;
/// "mixed_precision": the parameters' precision), accumulated over
/// `microbatches`, with `config`'s model, optimizer and data.tokens_file:
/// the weights before and after it and its metrics. Throws kiln::Error
/// when config names no tokens file.
struct CpuReferenceStep {
  Tensor tokens;
  TensorMap initial, updated;
  StepMetrics metrics;
};
CpuReferenceStep runCpuReferenceStep(const TrainConfig &config, const nlohmann::json &manifest,
                                     int64_t microbatches);

} // namespace kiln

#endif // KILN_DRIVER_CPUREFERENCESTEP_H
