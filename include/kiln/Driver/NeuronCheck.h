//===- NeuronCheck.h - The emitted HLO against the CPU runtime ---*- C++ -*-===//
//
// `kiln check-hlo DIR --config run.json`: evaluates the model.hlo.pb that
// `kiln compile` wrote for a run (every rank, with the reference evaluator)
// on the run's first token batch and initial weights, and compares the
// loss, the gradient norm and every updated weight with one step of the CPU
// runtime (kiln train's Trainer on one rank). See docs/neuron.md.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_DRIVER_NEURONCHECK_H
#define KILN_DRIVER_NEURONCHECK_H

#include "kiln/Driver/TrainConfig.h"

#include <string>

namespace kiln {

/// Prints the figures; returns false when a difference exceeds `tolerance`
/// (absolute, relative to values above 1).
bool checkNeuronArtifacts(const TrainConfig &config, const std::string &dir, double tolerance);

} // namespace kiln

#endif // KILN_DRIVER_NEURONCHECK_H
