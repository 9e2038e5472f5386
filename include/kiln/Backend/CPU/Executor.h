//===- Executor.h - Eager CPU execution of kiln IR --------------*- C++ -*-===//
//
// Interprets a func.func of kiln ops op by op on the host: each op runs
// through its CpuKernelOpInterface binding (attached by registerCpuKernels),
// and buffers are freed and donated exactly as BufferLiveness says. The
// executor knows nothing of Qwen3; it runs whatever function it is given.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_BACKEND_CPU_EXECUTOR_H
#define KILN_BACKEND_CPU_EXECUTOR_H

#include "kiln/Backend/CPU/ExecutionContext.h"
#include "kiln/Runtime/SafeTensors.h"
#include "kiln/Runtime/Tensor.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <map>
#include <string>
#include <vector>

namespace kiln {

/// Bytes of live tensors during one run, counted once per distinct buffer
/// (a reshape shares its input's bytes). Arguments count while the run holds
/// them: pass them by std::move so they can be freed after their last use.
struct ExecutionStats {
  int64_t peakLiveBytes = 0;
  /// Seconds spent in collectives (ops of the `shard` dialect).
  double collectiveSeconds = 0;
  /// With `timeOps` set, each op's seconds in this run (the planner's CPU
  /// calibration compares them with its per-op roofline).
  bool timeOps = false;
  std::map<mlir::Operation *, double> opSeconds;
};

/// The shape of a ranked tensor type.
Shape shapeOf(mlir::Type type);
/// The host dtype the executor computes a value of `type` in: F32 for any
/// float (narrow floats are rounded, not stored), I32 or I64 for integers.
DType computeDType(mlir::Type type);

/// Runs `fn` on `args` (one per function argument, float tensors as F32) and
/// returns its results. Every value is dropped after its last use. Throws
/// kiln::Error naming the op and its fqn if an op has no CPU kernel or a
/// kernel rejects its data; then, if `unusedOnFailure` is given, it receives
/// one tensor per argument: those no op had consumed or overwritten yet
/// (undefined for the others), so a caller can keep state it moved in.
std::vector<Tensor> runFunction(mlir::func::FuncOp fn, std::vector<Tensor> args,
                                ExecutionStats *stats = nullptr,
                                const ExecutionContext &context = {},
                                std::vector<Tensor> *unusedOnFailure = nullptr);

/// Builds the argument list of `fn`: arguments tagged `kiln.param` are read
/// from `checkpoint` by HF key and converted to F32; arguments tagged
/// `kiln.input` are taken from `inputs` by name. Shapes must match the
/// function's types exactly; mismatches name the key, the checkpoint and both
/// shapes.
std::vector<Tensor> bindArguments(mlir::func::FuncOp fn, const Checkpoint &checkpoint,
                                  const std::map<std::string, Tensor> &inputs);

/// Throws kiln::Error naming the checkpoint and the first tensors it holds
/// that no `kiln.param` argument of `fn` reads (a checkpoint of another
/// shape than config.json says). bindArguments checks this first.
void checkAllTensorsUsed(const Checkpoint &checkpoint, mlir::func::FuncOp fn);

/// Reads parameter `key` from `checkpoint` as an owned F32 (or integer)
/// tensor of exactly `type`'s shape; `user` names who needs it in errors.
/// With `slice`, returns slice(the stored tensor) instead, taken from the
/// memory-mapped file before any conversion, so a rank reads only its part.
Tensor bindParameter(const Checkpoint &checkpoint, const std::string &key, mlir::Type type,
                     const std::string &user,
                     llvm::function_ref<Tensor(Tensor)> slice = nullptr);

} // namespace kiln

#endif // KILN_BACKEND_CPU_EXECUTOR_H
