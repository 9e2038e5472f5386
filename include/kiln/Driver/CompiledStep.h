//===- CompiledStep.h - The hlo training step compiled for the CPU -*- C++ -*-===//
//
// Compiled mode's front door: the hlo @train_step that kiln compile wrote
// (DIR/model.hlo.mlir, the module exported to model.hlo.pb) through the
// pipeline's Linalg and Llvm stages and MLIR's JIT, ready to run on Kiln
// tensors. See docs/compiled.md.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_DRIVER_COMPILEDSTEP_H
#define KILN_DRIVER_COMPILEDSTEP_H

#include "kiln/Backend/Compiled/CompiledCollectives.h"
#include "kiln/Backend/Compiled/CompiledFunction.h"
#include "kiln/Driver/HloKernelCall.h"
#include "kiln/Pipeline/KilnPipeline.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

#include <memory>
#include <string>

namespace kiln {

/// One custom call of the step: its kernel and its operand and result types.
struct CompiledKernelCall {
  HloKernelCall call;
  std::vector<TensorSignature> operands, results;
};

struct CompiledStep {
  /// Owns the kernels' options when the step was read from a file.
  std::unique_ptr<mlir::MLIRContext> context;
  std::unique_ptr<CompiledFunction> function;
  /// By call site (numberCustomCallSites).
  std::vector<CompiledKernelCall> kernelCalls;
  /// By collective site (numberCollectiveSites), run on `grid`.
  std::vector<CompiledCollective> collectives;
  DeviceGrid *grid = nullptr;
  /// Fault injection (debug.fail_collective_on_rank): this grid rank's first
  /// collective fails, as a rank's error would, so that tests see every rank
  /// end; -1: none.
  int64_t failCollectiveOnRank = -1;
  /// Parsing and the pipeline (hlo -> linalg -> LLVM dialect); the JIT's
  /// own time is function->compileSeconds().
  double lowerSeconds = 0;

  /// Runs the step; its custom calls run their kernels' CPU implementations,
  /// its collectives the grid's. A kernel's or a collective's error is
  /// rethrown here, naming the call; after it, the step's other host calls
  /// return at once (a rank that stops at an error leaves its collectives,
  /// and ends the others, see Trainer).
  std::vector<Tensor> operator()(const std::vector<Tensor> &arguments) const;
  /// The same, the state updated in the buffers of the arguments donated
  /// (CompiledFunction::donating): after an error, those are gone.
  std::vector<Tensor> donating(std::vector<Tensor> &arguments) const;

private:
  std::vector<Tensor> run(std::vector<Tensor> &arguments, bool donate) const;
};

/// The hlo @train_step of `module` (after the pipeline's Hlo stage) alone in
/// a module of its own: what model.hlo.mlir holds and compiled mode compiles.
mlir::OwningOpRef<mlir::ModuleOp> extractHloStep(mlir::ModuleOp module);

/// extractHloStep's module printed with its locations (the kiln fqn of each
/// instruction): model.hlo.mlir.
std::string printHloStep(mlir::ModuleOp module);

/// Compiled mode's hlo step of the captured step in `captured` (left as it
/// is): a copy taken through the pipeline's Hlo stage with `options` (whose
/// CPU-only kernels become custom calls compiled mode runs), then extracted;
/// `what` names the step in errors.
mlir::OwningOpRef<mlir::ModuleOp> lowerToHloStep(mlir::ModuleOp captured,
                                                 KilnPipelineOptions &options,
                                                 const std::string &what);

/// Compiles the @train_step of `path` (an hlo module in MLIR text). Throws
/// kiln::Error naming the file when it is missing or does not parse, and the
/// op (with its kiln fqn) that compiled mode cannot lower.
CompiledStep compileHloStep(const std::string &path);

/// Compiles the @train_step of `hloStep` (extractHloStep's module; lowered in
/// place); `what` names it in errors. Its collectives run on `grid`, which
/// must be the layout the step was built for (bindCollectives); without
/// one, a step with collectives is refused.
CompiledStep compileHloStep(mlir::ModuleOp hloStep, const std::string &what,
                            DeviceGrid *grid = nullptr);

/// The native code of `hloStep`'s @train_step alone (lowered in place), for
/// CompiledFunction::writeObject: its host calls are not bound, so it does
/// not run here (kiln compile --target cpu).
std::unique_ptr<CompiledFunction> compileHloStepCode(mlir::ModuleOp hloStep,
                                                     const std::string &what,
                                                     double *lowerSeconds = nullptr);

/// The @train_step of `hloStep` (extractHloStep's module, not lowered) from
/// the object file a compileHloStep of the same module wrote, with the
/// out-parameter buffers and threaded loop nests its function reported:
/// linked, not compiled. The host calls are bound as compileHloStep binds
/// them. Throws kiln::Error naming the file when it does not link.
CompiledStep linkCompiledStep(mlir::ModuleOp hloStep, const std::string &objectPath,
                              std::vector<int64_t> outParamBuffers,
                              const std::vector<std::string> &parallelLoopNests,
                              const std::string &what, DeviceGrid *grid = nullptr);

} // namespace kiln

#endif // KILN_DRIVER_COMPILEDSTEP_H
