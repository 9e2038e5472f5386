//===- HloEvaluator.h - A reference evaluator of emitted HLO -----*- C++ -*-===//
//
// Evaluates the entry computation of an HloModuleProto as Kiln emits it, on
// the CPU, for every rank of the SPMD program at once: instruction by
// instruction, each rank with its own replica-id, collectives combining the
// ranks of their replica groups. Arithmetic is done in double and rounded
// to the instruction's element type, so float32 results are correctly
// rounded. For validation only: slow, and only the instructions Kiln emits
// (gather and scatter in the row form of embeddings); anything else is an
// error naming the instruction.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_BACKEND_NEURON_HLOEVALUATOR_H
#define KILN_BACKEND_NEURON_HLOEVALUATOR_H

#include "proto/hlo.pb.h"

#include <cstdint>
#include <functional>
#include <vector>

namespace kiln::neuron {

/// A dense array value: elements row-major, held as doubles.
struct HloArray {
  xla::PrimitiveType type = xla::F32;
  std::vector<int64_t> dims;
  std::vector<double> values;

  int64_t size() const;
};

/// Computes a custom call's results from its operands (one rank's).
using HloCustomCall = std::function<std::vector<HloArray>(
    const xla::HloInstructionProto &, const std::vector<const HloArray *> &)>;

/// Throws kiln::Error naming the first custom call when there is no
/// `customCall` to evaluate it with.
void checkEvaluable(const xla::HloModuleProto &module, const HloCustomCall &customCall = {});

/// `args[rank][i]` is parameter i of `rank`; returns the root tuple's
/// elements of each rank. Throws kiln::Error on an instruction it cannot
/// evaluate or arguments of the wrong shape.
std::vector<std::vector<HloArray>> evaluateHlo(const xla::HloModuleProto &module,
                                               const std::vector<std::vector<HloArray>> &args,
                                               const HloCustomCall &customCall = {});

} // namespace kiln::neuron

#endif // KILN_BACKEND_NEURON_HLOEVALUATOR_H
