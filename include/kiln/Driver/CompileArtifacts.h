//===- CompileArtifacts.h - What every kiln compile target writes -*- C++ -*-===//
//
// kiln compile writes one folder per run and target (the Neuron artifacts,
// docs/neuron.md; the CPU step, docs/compiled.md): locked while written and
// replaced as a whole, with a manifest.json whose "parameters" and
// "outputs" say how to feed the step's entry and read its results.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_DRIVER_COMPILEARTIFACTS_H
#define KILN_DRIVER_COMPILEARTIFACTS_H

#include "kiln/Support/FileLock.h"

#include "proto/hlo.pb.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <nlohmann/json.hpp>

#include <optional>
#include <string>

namespace kiln {

/// Holds `outDir` (required) for this compile (`lock`: a flock on a hidden sibling,
/// `.<name>.kiln-compile.lock`, since the folder itself is swapped), refuses
/// a folder that is not a compile's (the whole folder is replaced), and
/// removes what killed compiles left beside it.
void lockOutputFolder(const std::string &outDir, std::optional<FileLock> &lock);

/// Each argument of the kiln-level @train_step `step` (or a pipeline
/// stage's forward or backward): its role, name (parameter key, state,
/// input, gradient) or number (a stage's transfer, residual, cotangent),
/// microbatch, per-rank shape, whole shape (a parameter's from the global
/// @loss) and split over the grid's axes.
nlohmann::json describeParameters(mlir::func::FuncOp step, mlir::func::FuncOp loss,
                                  llvm::ArrayRef<int64_t> grid,
                                  llvm::ArrayRef<std::string> axisNames);

/// Each result of `step`: its index and role (param, state, output, grad)
/// with its name, or (transfer, residual, cotangent) with its number.
nlohmann::json describeOutputs(mlir::func::FuncOp step);

/// Completes the manifest's "parameters" and "outputs" of a module (as
/// describeParameters and describeOutputs wrote them) with what only the
/// exported module says: each parameter's dtype (s64 inputs are s32 there)
/// and NEFF name, the rank parameter kiln-lower-to-hlo appended (fed each
/// rank's global id), and each output's NEFF name.
void describeEntry(const xla::HloModuleProto &proto, nlohmann::json &params,
                   nlohmann::json &outputs);

} // namespace kiln

#endif // KILN_DRIVER_COMPILEARTIFACTS_H
