//===- MemoryPlan.cpp - Static live-memory plan of a kiln function --------===//

#include "kiln/Planner/MemoryPlan.h"
#include "kiln/Dialect/Kiln/IR/KilnOps.h"
#include "kiln/Passes.h"

#include "llvm/ADT/DenseMap.h"

using namespace mlir;

namespace kiln {

MemoryPlan planMemory(func::FuncOp fn) {
  MemoryPlan plan;
  Block &body = fn.getBody().front();
  llvm::DenseMap<Value, Operation *> lastUser;
  for (Operation &op : body)
    for (Value operand : op.getOperands())
      lastUser[operand] = &op;

  // Buffers by id; a reshape's result maps to its input's buffer.
  llvm::DenseMap<Value, unsigned> bufferOf;
  std::vector<std::pair<int64_t, int64_t>> buffers; // bytes, live references
  int64_t live = 0, liveIntermediate = 0;
  auto define = [&](Value value, std::optional<unsigned> shared, bool isArgument) {
    if (value.use_empty())
      return;
    unsigned id = shared ? *shared : unsigned(buffers.size());
    if (!shared)
      buffers.push_back({tensorBytes(value.getType()), 0});
    bufferOf[value] = id;
    if (buffers[id].second++ == 0) {
      live += buffers[id].first;
      if (!isArgument)
        liveIntermediate += buffers[id].first;
    }
    plan.peakBytes = std::max(plan.peakBytes, live);
    plan.peakIntermediateBytes = std::max(plan.peakIntermediateBytes, liveIntermediate);
  };
  llvm::DenseSet<unsigned> argumentBuffers, savedBuffers;
  for (BlockArgument arg : body.getArguments()) {
    define(arg, std::nullopt, /*isArgument=*/true);
    if (arg.use_empty())
      continue;
    int64_t bytes = tensorBytes(arg.getType());
    argumentBuffers.insert(bufferOf[arg]);
    plan.argumentBytes += bytes;
    if (fn.getArgAttr(arg.getArgNumber(), kParamAttr))
      plan.parameterBytes += bytes;
    if (fn.getArgAttr(arg.getArgNumber(), kStateAttr))
      plan.stateBytes += bytes;
  }

  // The buffer of `operand` if the executor hands it to `op` as the only
  // reference (it dies at `op`, appears once there, no other value aliases
  // it), so the kernel may write a result into it. Arguments count as moved
  // in by the caller, as the Trainer does.
  auto donatedBuffer = [&](Operation &op, Value operand) -> std::optional<unsigned> {
    auto it = bufferOf.find(operand);
    if (it == bufferOf.end() || lastUser.lookup(operand) != &op ||
        llvm::count(op.getOperands(), operand) != 1 || buffers[it->second].second != 1)
      return std::nullopt;
    return it->second;
  };

  // One gradient per parameter, of the parameter's type.
  plan.gradientBytes = plan.parameterBytes;

  for (Operation &op : body) {
    if (isa<func::ReturnOp>(op))
      break;
    auto kernel = dyn_cast<CpuKernelOpInterface>(op);
    for (OpResult result : op.getResults()) {
      std::optional<unsigned> shared;
      if (isa<ReshapeOp>(op))
        shared = bufferOf.lookup(op.getOperand(0));
      else if (std::optional<unsigned> donor =
                   kernel ? kernel.getInPlaceOperand(result.getResultNumber()) : std::nullopt)
        if (std::optional<unsigned> id = donatedBuffer(op, op.getOperand(*donor)))
          shared = id;
      define(result, shared, shared && argumentBuffers.contains(*shared));
    }
    if (auto saved = op.getAttrOfType<DenseI64ArrayAttr>(kSavedAttr))
      for (int64_t index : saved.asArrayRef())
        if (auto it = bufferOf.find(op.getResult(index)); it != bufferOf.end())
          if (!argumentBuffers.contains(it->second) && savedBuffers.insert(it->second).second)
            plan.savedActivationBytes += buffers[it->second].first;
    for (Value operand : op.getOperands()) {
      if (lastUser.lookup(operand) != &op || !bufferOf.count(operand))
        continue;
      unsigned id = bufferOf[operand];
      bufferOf.erase(operand);
      if (--buffers[id].second == 0) {
        live -= buffers[id].first;
        if (!argumentBuffers.contains(id))
          liveIntermediate -= buffers[id].first;
      }
    }
  }
  return plan;
}

} // namespace kiln
