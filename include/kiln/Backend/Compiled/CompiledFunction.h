//===- CompiledFunction.h - A lowered function JIT-compiled for the CPU -*- C++ -*-===//
//
// Compiled mode's runner: one function of a module that the pipeline's
// Llvm stage lowered (buildKilnPipeline: hlo -> linalg -> buffers -> the
// LLVM dialect), compiled to native code by MLIR's ExecutionEngine (ORC
// JIT for the host CPU) and called on Kiln tensors. The
// lowering turned the function's results into trailing out-parameters
// (buffer-results-to-out-params), so the caller allocates them and the
// function writes them. See docs/compiled.md.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_BACKEND_COMPILED_COMPILEDFUNCTION_H
#define KILN_BACKEND_COMPILED_COMPILEDFUNCTION_H

#include "kiln/Backend/Compiled/StepArena.h"
#include "kiln/Runtime/Tensor.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace mlir {
class ModuleOp;
class Type;
namespace func {
class FuncOp;
} // namespace func
} // namespace mlir

namespace kiln {

/// The element type and shape of one argument or result.
struct TensorSignature {
  DType dtype;
  Shape shape;
};

/// The tensor arguments and results of `func` (tensor level, before
/// lowering), as Kiln tensors hold them: ui32 as I32. Throws kiln::Error
/// naming the first one a Kiln tensor cannot hold (a predicate).
struct FunctionSignature {
  std::vector<TensorSignature> arguments, results;
  static FunctionSignature of(mlir::func::FuncOp func);
  /// One tensor type; `what` names it in the error.
  static TensorSignature signatureOf(mlir::Type type, const std::string &what);
};

class CompiledFunction {
public:
  /// Compiles function `name` of `llvmModule` (the LLVM dialect), whose
  /// signature before lowering was `signature`, with LLVM's optimizer at
  /// `optLevel` (0: code generation alone); the code's external symbols
  /// resolve to `hostSymbols` (name, address) first. Throws kiln::Error
  /// when the module does not translate or compile, naming the function.
  CompiledFunction(mlir::ModuleOp llvmModule, const std::string &name,
                   FunctionSignature signature,
                   const std::vector<std::pair<std::string, void *>> &hostSymbols = {},
                   int optLevel = 0, bool keepObject = false);
  /// The function of the object file at `objectPath` that writeObject wrote
  /// (the native code of a lowered module, ahead of time): `name`, its
  /// signature, its out-parameters' buffers and its threaded loop nests are
  /// what the compiling function reported. Nothing is compiled: the object
  /// is linked into this process, its external symbols resolved to
  /// `hostSymbols`, the host functions every compiled function binds and
  /// this process's libraries. Throws kiln::Error naming the file when it
  /// cannot be read or linked, or lacks one of the functions.
  CompiledFunction(const std::string &objectPath, const std::string &name,
                   FunctionSignature signature, std::vector<int64_t> outParamBuffers,
                   const std::vector<std::string> &parallelLoopNests,
                   const std::vector<std::pair<std::string, void *>> &hostSymbols);
  ~CompiledFunction();
  CompiledFunction(const CompiledFunction &) = delete;
  CompiledFunction &operator=(const CompiledFunction &) = delete;

  /// Calls it. Each argument must have its signature's dtype and shape (an
  /// error names the first that does not); the code reads the arguments in
  /// place (kiln-convert-hlo-to-linalg marks them not writable, so
  /// bufferization copies one it would update) and writes each result to a
  /// buffer of its own.
  std::vector<Tensor> operator()(const std::vector<Tensor> &arguments) const;
  /// The same, donating to the results the state arguments whose buffers
  /// they may take (outParamBuffers) where nothing else holds them
  /// (Tensor::isUniquelyOwned): such a result is the argument's tensor,
  /// updated in place, and its entry in `arguments` is left empty, also when
  /// a host call's error is rethrown after the call (the old state is gone).
  std::vector<Tensor> donating(std::vector<Tensor> &arguments) const;
  /// By result: the argument whose buffer the code may write it to
  /// (kiln-compact-buffers' kiln.out_param_buffers), -1 for none.
  const std::vector<int64_t> &outParamBuffers() const { return outParamBuffers_; }

  const FunctionSignature &signature() const { return signature_; }
  /// Where the code's buffers come from when the module was lowered with the
  /// pipeline's host-allocator option (compiled mode's): its last run's
  /// allocations and the planned arena.
  const StepArena &arena() const { return *arena_; }
  /// The last call's live peak: its arguments and results (the runner's)
  /// and the most of its temporaries live at once (the arena's count).
  int64_t lastPeakLiveBytes() const { return lastPeakLiveBytes_; }
  /// How many of its loop nests run on the host's threads (kiln_parallel_for).
  size_t threadedLoopNests() const;
  /// Their functions' names, by site.
  const std::vector<std::string> &threadedLoopNestNames() const;
  /// Writes the native code, one relocatable object for the host CPU, to
  /// `path`; only a function compiled with keepObject has it. Throws
  /// kiln::Error naming the file when it cannot be written.
  void writeObject(const std::string &path) const;
  /// Seconds spent translating to LLVM IR, optimizing and generating code
  /// (or linking the object file).
  double compileSeconds() const { return compileSeconds_; }

  /// The JIT and what the host calls look up in it (CompiledFunction.cpp).
  struct Engine;

private:
  std::vector<Tensor> call(std::vector<Tensor> &arguments, bool donate) const;
  /// Looks up the entry and the loop nests (`lookup`: a packed wrapper's
  /// address by function name, or an error).
  template <typename Lookup>
  void bind(Lookup lookup, const std::string &where);

  std::unique_ptr<Engine> engine_;
  std::unique_ptr<StepArena> arena_;
  std::string name_;
  FunctionSignature signature_;
  std::vector<int64_t> outParamBuffers_;
  std::vector<std::string> parallelLoopNames_;
  double compileSeconds_ = 0;
  mutable int64_t lastPeakLiveBytes_ = 0;
};

} // namespace kiln

#endif // KILN_BACKEND_COMPILED_COMPILEDFUNCTION_H
