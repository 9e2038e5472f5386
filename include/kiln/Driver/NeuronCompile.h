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
#include "kiln/Planner/TargetProfile.h"

#include <cstdint>
#include <string>

namespace kiln {

/// The most ranks kiln compile builds a step for. Every collective's explicit
/// replica groups (the form neuronx-cc reads) list every rank, so the module
/// grows as the world times its collectives: at 131072 ranks qwen3-4b's step
/// writes 3.9 GB of files in about 45 s on a 2-core machine with 5.4 GB of
/// memory; a million ranks would need about 40 GB.
constexpr int64_t kMaxCompiledWorld = int64_t(1) << 17;
/// From this many ranks kiln compile says on stderr what it is doing before
/// each phase that grows with them (a few seconds and more).
constexpr int64_t kLargeCompiledWorld = int64_t(1) << 14;

/// Writes the artifacts of `config`'s run into `outDir` (created if needed)
/// and prints the figures (instructions, collectives, memory, phase times).
/// Throws kiln::Error for a target that is not Neuron's, an op without an
/// HLO lowering (named with its fqn) or a directory it cannot write, and
/// for a module whose plan does not fit a rank of the target's memory
/// (neuronRankProfile), with the plan's breakdown, unless `allowOversize`.
void compileForNeuron(const TrainConfig &config, const std::string &outDir,
                      bool allowOversize = false);

/// The planner's profile of one rank of a Neuron compile target (unset:
/// trn2): trn2 is
/// trn2.48xlarge (whose rank is a logical core at LNC=2; at target.lnc 1
/// one physical core, with half its memory, engines and bandwidth), trn1
/// trn1.32xlarge (a rank is one NeuronCore-v2).
TargetProfile neuronRankProfile(const TrainConfig::Target &target);

/// compile.sh of one module: neuronx-cc for the config's target and LNC,
/// with -O1, --no-llm-training and --verify-hlo as options; the module uses
/// `communicators` distinct replica-group lists.
/// With `bindKernels` (the module has NKI custom calls) it runs
/// bind_kernels.py first (NkiBinder.h).
std::string neuronCompileScript(const TrainConfig &config, size_t communicators, bool bindKernels);

/// The neuronx-cc command line compile.sh runs for `target` ("trn2",
/// "trn1") and logical NeuronCore config `lnc`.
std::string neuronxCommand(TargetName target, int64_t lnc);

} // namespace kiln

#endif // KILN_DRIVER_NEURONCOMPILE_H
