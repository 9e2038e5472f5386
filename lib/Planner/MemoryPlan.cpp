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
  llvm::DenseSet<unsigned> argumentBuffers;
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

  // One gradient per parameter, of the parameter's type.
  plan.gradientBytes = plan.parameterBytes;

  for (Operation &op : body) {
    if (isa<func::ReturnOp>(op))
      break;
    for (Value result : op.getResults()) {
      std::optional<unsigned> shared;
      if (isa<ReshapeOp>(op))
        shared = bufferOf.lookup(op.getOperand(0));
      define(result, shared, shared && argumentBuffers.contains(*shared));
    }
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
