//===- CpuCompile.h - kiln compile --target cpu: the step, ahead of time -*- C++ -*-===//
//
// Compiled mode's step (CompiledStep.h) compiled once and kept: the run's
// per-rank hlo @train_step, lowered and compiled for this CPU as `kiln train
// --compile.enable=true` compiles it, written as a relocatable object with
// the module it came from and a manifest. `kiln train --compile.enable=true
// --compile.artifact=DIR` links the object instead of compiling, after
// checking that it is this run's step: the same Kiln build, model, layout,
// batch, precision and program (a fingerprint of the hlo step), for a CPU
// with every feature the code uses. See docs/compiled.md.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_DRIVER_CPUCOMPILE_H
#define KILN_DRIVER_CPUCOMPILE_H

#include "kiln/Driver/CompiledStep.h"
#include "kiln/Driver/TrainConfig.h"

#include <nlohmann/json.hpp>

#include <string>

namespace kiln {

struct ParallelLayout;
struct KilnPipelineOptions;
struct Qwen3Config;

/// What makes a CPU artifact the step of a run (manifest "identity"): the
/// Kiln version, the model, the layout, the batch, the precision and the
/// fingerprint of `hloStep` (extractHloStep's module, before lowering),
/// which covers every option that changes the program.
nlohmann::json cpuStepIdentity(const TrainConfig &config, const Qwen3Config &model,
                               const ParallelLayout &layout,
                               const KilnPipelineOptions &options, mlir::ModuleOp hloStep);

/// Writes `config`'s step for this CPU into `outDir` (replaced as a whole:
/// train_step.o, model.hlo.mlir, manifest.json, README.txt) and prints the
/// figures. Throws kiln::Error for an op compiled mode cannot lower (named
/// with its fqn) or a folder it cannot write.
void compileForCpu(const TrainConfig &config, const std::string &outDir);

/// The step of the artifact in `dir` (compile.artifact), linked for
/// `hloStep` (this run's, before lowering) with its collectives on `grid`.
/// Throws kiln::Error naming the folder and what differs when the artifact
/// is not `identity`'s step, was compiled for a CPU feature this one lacks,
/// or its files are missing, edited or truncated.
CompiledStep linkCpuArtifact(const std::string &dir, const nlohmann::json &identity,
                             mlir::ModuleOp hloStep, DeviceGrid *grid);

} // namespace kiln

#endif // KILN_DRIVER_CPUCOMPILE_H
