//===- NeuronCheck.h - The emitted HLO against the CPU runtime ---*- C++ -*-===//
//
// `kiln check-hlo DIR --config run.json`: evaluates the model.hlo.pb that
// `kiln compile` wrote for a run (every rank, with the reference evaluator)
// (or, with --backend compiled, model.hlo.mlir compiled for the CPU) on the
// run's first token batch and initial weights, and compares the
// loss, the gradient norm and every updated weight with one step of the CPU
// runtime (kiln train's Trainer on one rank). `kiln check-hlo --neuron DIR`
// checks the Neuron conformance rules alone. See docs/neuron.md.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_DRIVER_NEURONCHECK_H
#define KILN_DRIVER_NEURONCHECK_H

#include "kiln/Driver/TrainConfig.h"

#include <string>

namespace kiln {

/// What runs the module: the reference evaluator (every rank, in one
/// process) or compiled mode (DIR/model.hlo.mlir compiled for the CPU by
/// MLIR's JIT; one rank until collectives are lowered).
enum class HloBackend { Evaluator, Compiled };

/// Prints the figures; returns false when a difference exceeds `tolerance`
/// (absolute, relative to values above 1). With `saveIo`, also writes every
/// rank's arguments and the evaluated results there (io.json and
/// rank<r>.bin: float32 or int32, little-endian) for another XLA
/// implementation to run the module on (scripts/check-hlo-xla.py).
bool checkNeuronArtifacts(const TrainConfig &config, const std::string &dir, double tolerance,
                          const std::string &saveIo = "",
                          HloBackend backend = HloBackend::Evaluator);

/// Checks DIR/model.hlo.pb against every Neuron conformance rule
/// (NeuronConformance.h), with the world size and communicator limit of
/// DIR/manifest.json, and the manifest against the module (each parameter
/// and output named as the module names it, one rank parameter); prints one
/// line per rule and returns false if any is broken. A pipelined run's
/// folder (its manifest's "pipeline") is checked module by module.
bool checkNeuronConformance(const std::string &dir);

/// Whether DIR holds a pipelined run's modules (its manifest's
/// "pipeline"): one per stage program and pipeline rank's update.
bool isPipelinedArtifacts(const std::string &dir);

/// checkNeuronArtifacts for a pipelined run's folder: every module
/// evaluated in the order a step runs them (each microbatch's forwards up
/// the stages, the backwards down, what crosses fed to the ranks with the
/// same other coordinates, gradients summed over the microbatches and a tied
/// table's between its pipeline ranks; then each update), and the loss,
/// gradient norm and weights held to one CPU rank's step. Each update is
/// evaluated alone, so its clipping sees only its pipeline rank's share of
/// the norm: throws kiln::Error when the CPU step clips.
bool checkPipelinedNeuronArtifacts(const TrainConfig &config, const std::string &dir,
                                   double tolerance);

} // namespace kiln

#endif // KILN_DRIVER_NEURONCHECK_H
