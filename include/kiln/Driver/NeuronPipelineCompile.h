//===- NeuronPipelineCompile.h - kiln compile under pipeline parallelism -*- C++ -*-===//
#ifndef KILN_DRIVER_NEURONPIPELINECOMPILE_H
#define KILN_DRIVER_NEURONPIPELINECOMPILE_H

#include "kiln/Driver/ParallelLayout.h"
#include "kiln/Driver/TrainConfig.h"

#include <string>

namespace kiln {

/// kiln compile for a run with `layout.pp > 1`: into `outDir`, one folder
/// per HLO module (stage<s>_forward, stage<s>_backward for one microbatch,
/// update_pp<r>), each with model.hlo.pb, model.hlo.txt, its manifest.json
/// and compile.sh; a manifest.json with the grid, every pipeline rank's
/// actions and the module each runs, and what crosses each stage boundary
/// between which ranks; and a compile.sh compiling every module. Each
/// module passes Neuron's conformance rules or kiln::Error names them.
void compilePipelineForNeuron(const TrainConfig &config, const Qwen3Config &model,
                              const ParallelLayout &layout, const std::string &outDir);

} // namespace kiln

#endif // KILN_DRIVER_NEURONPIPELINECOMPILE_H
