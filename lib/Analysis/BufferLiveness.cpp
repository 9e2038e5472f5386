//===- BufferLiveness.cpp - Buffers, last uses and donations --------------===//

#include "kiln/Analysis/BufferLiveness.h"
#include "kiln/Dialect/Kiln/IR/KilnOps.h"

using namespace mlir;

namespace kiln {

FailureOr<BufferLiveness> BufferLiveness::compute(func::FuncOp fn) {
  if (fn.isExternal())
    return fn.emitError() << "@" << fn.getName() << " is a declaration; it has no body to run";
  if (!fn.getBody().hasOneBlock())
    return fn.emitError() << "@" << fn.getName() << " must have a single-block body";
  BufferLiveness a;
  Block &body = fn.getBody().front();
  a.body_ = &body;

  llvm::DenseMap<Value, Operation *> lastUser;
  for (Operation &op : body)
    for (Value operand : op.getOperands())
      lastUser[operand] = &op;

  std::vector<int64_t> liveValues;              // per buffer: live values using it
  llvm::DenseMap<Value, unsigned> liveBuffer;   // live values only
  auto assign = [&](Value value, unsigned id) {
    ++liveValues[id];
    liveBuffer[value] = id;
    a.bufferOf_[value] = id;
  };
  auto create = [&](Value value, bool isArgument) -> unsigned {
    a.buffers_.push_back({tensorBytes(value.getType()), isArgument, value});
    liveValues.push_back(0);
    assign(value, a.buffers_.size() - 1);
    return a.buffers_.size() - 1;
  };

  for (BlockArgument arg : body.getArguments())
    if (!arg.use_empty())
      a.argumentBuffers_.push_back(create(arg, /*isArgument=*/true));

  for (Operation &op : body) {
    if (op.hasTrait<OpTrait::IsTerminator>())
      break;
    Step &step = a.steps_[&op];
    // Each distinct operand whose last use is here (a repeated one once).
    for (OpOperand &use : op.getOpOperands())
      if (lastUser.lookup(use.get()) == &op &&
          unsigned(llvm::find(op.getOperands(), use.get()) - op.getOperands().begin()) ==
              use.getOperandNumber())
        step.dyingOperands.push_back(use.getOperandNumber());
    // A donor dies here, appears once, and is its buffer's only live value.
    auto donatable = [&](unsigned index) {
      Value operand = op.getOperand(index);
      auto it = liveBuffer.find(operand);
      return it != liveBuffer.end() && lastUser.lookup(operand) == &op &&
             llvm::count(op.getOperands(), operand) == 1 && liveValues[it->second] == 1;
    };
    auto view = dyn_cast<ViewLikeOpInterface>(op);
    auto tied = dyn_cast<TiedOperandOpInterface>(op);
    llvm::SmallDenseSet<unsigned> donated;
    for (OpResult result : op.getResults()) {
      std::optional<unsigned> donor;
      if (tied)
        if (std::optional<unsigned> operand = tied.getTiedOperand(result.getResultNumber()))
          if (!donated.contains(*operand) && donatable(*operand))
            donor = operand;
      if (donor)
        donated.insert(*donor);
      step.donors.push_back(donor);
      if (result.use_empty())
        continue;
      if (view && result == view.getViewDest() && liveBuffer.count(view.getViewSource()))
        assign(result, liveBuffer.lookup(view.getViewSource()));
      else if (donor)
        assign(result, liveBuffer.lookup(op.getOperand(*donor)));
      else
        step.created.push_back(create(result, /*isArgument=*/false));
    }
    for (unsigned index : step.dyingOperands) {
      auto it = liveBuffer.find(op.getOperand(index));
      if (it == liveBuffer.end())
        continue;
      unsigned id = it->second;
      liveBuffer.erase(it);
      if (--liveValues[id] == 0)
        step.released.push_back(id);
    }
  }
  return a;
}

std::optional<unsigned> BufferLiveness::bufferOf(Value value) const {
  auto it = bufferOf_.find(value);
  return it == bufferOf_.end() ? std::nullopt : std::optional<unsigned>(it->second);
}

} // namespace kiln
