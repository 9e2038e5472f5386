//===- MemoryPlan.cpp - Static live-memory plan of a kiln function --------===//

#include "kiln/Planner/MemoryPlan.h"
#include "kiln/Analysis/BufferLiveness.h"
#include "kiln/Dialect/Kiln/IR/KilnOps.h"
#include "kiln/Support/Diagnostics.h"

using namespace mlir;

namespace kiln {

MemoryPlan planMemory(func::FuncOp fn) {
  FailureOr<BufferLiveness> liveness = failure();
  succeedOrFail(*fn->getContext(), "no memory plan for @" + fn.getName().str(), [&] {
    liveness = BufferLiveness::compute(fn);
    return LogicalResult(liveness);
  });
  MemoryPlan plan;
  int64_t live = 0, liveIntermediate = 0;
  auto acquire = [&](unsigned id) {
    const BufferLiveness::Buffer &buffer = liveness->buffer(id);
    live += buffer.bytes;
    if (!buffer.isArgument)
      liveIntermediate += buffer.bytes;
    plan.peakBytes = std::max(plan.peakBytes, live);
    plan.peakIntermediateBytes = std::max(plan.peakIntermediateBytes, liveIntermediate);
  };

  for (unsigned id : liveness->argumentBuffers()) {
    acquire(id);
    auto arg = cast<BlockArgument>(liveness->buffer(id).creator);
    int64_t bytes = liveness->buffer(id).bytes;
    plan.argumentBytes += bytes;
    if (fn.getArgAttr(arg.getArgNumber(), kParamAttr))
      plan.parameterBytes += bytes;
    if (fn.getArgAttr(arg.getArgNumber(), kStateAttr))
      plan.stateBytes += bytes;
  }

  // Gradients: those a function returns (kiln.grad results) and those an
  // optimizer update consumes, each value counted once.
  llvm::DenseSet<Value> gradients;
  auto ret = cast<func::ReturnOp>(liveness->body().getTerminator());
  for (unsigned i = 0, e = fn.getNumResults(); i < e; ++i)
    if (fn.getResultAttr(i, kGradAttr))
      gradients.insert(ret.getOperand(i));

  llvm::DenseSet<unsigned> saved;
  for (Operation &op : liveness->body().without_terminator()) {
    const BufferLiveness::Step &step = liveness->step(&op);
    for (unsigned id : step.created)
      acquire(id);
    if (auto adamw = dyn_cast<AdamWOp>(op))
      gradients.insert(adamw.getGrad());
    if (auto indices = op.getAttrOfType<DenseI64ArrayAttr>(kSavedAttr))
      for (int64_t index : indices.asArrayRef())
        if (std::optional<unsigned> id = liveness->bufferOf(op.getResult(index)))
          if (!liveness->buffer(*id).isArgument && saved.insert(*id).second)
            plan.savedActivationBytes += liveness->buffer(*id).bytes;
    for (unsigned id : step.released) {
      live -= liveness->buffer(id).bytes;
      if (!liveness->buffer(id).isArgument)
        liveIntermediate -= liveness->buffer(id).bytes;
    }
  }
  for (Value gradient : gradients)
    plan.gradientBytes += tensorBytes(gradient.getType());
  return plan;
}

} // namespace kiln
