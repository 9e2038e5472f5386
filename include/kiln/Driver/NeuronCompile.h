//===- NeuronCompile.h - kiln compile: Neuron artifacts of a run -*- C++ -*-===//
//
// The run's per-rank training step (captured, differentiated, sharded and
// partitioned as `kiln train` does) lowered to XLA HLO for neuronx-cc:
// model.hlo.pb, model.hlo.txt, manifest.json, compile.sh and README.txt in
// one directory, each written atomically. See docs/neuron.md.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_DRIVER_NEURONCOMPILE_H
#define KILN_DRIVER_NEURONCOMPILE_H

#include "kiln/Driver/TrainConfig.h"

#include <string>

namespace kiln {

/// Writes the artifacts of `config`'s run into `outDir` (created if needed)
/// and prints the figures (instructions, collectives, memory, phase times).
/// Throws kiln::Error for a target that is not Neuron's, an op without an
/// HLO lowering (named with its fqn) or a directory it cannot write.
void compileForNeuron(const TrainConfig &config, const std::string &outDir);

/// The neuronx-cc command line compile.sh runs for `target` ("trn2",
/// "trn1") and logical NeuronCore config `lnc`.
std::string neuronxCommand(const std::string &target, int64_t lnc);

} // namespace kiln

#endif // KILN_DRIVER_NEURONCOMPILE_H
