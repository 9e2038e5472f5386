//===- Precision.cpp - Bytes of each value at a target's precision --------===//

#include "kiln/Planner/Precision.h"
#include "kiln/Dialect/Kiln/IR/KilnOps.h"

#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"

using namespace mlir;

namespace kiln {

llvm::DenseSet<Value> stepGradients(func::FuncOp fn) {
  llvm::DenseSet<Value> gradients;
  Block &body = fn.getBody().front();
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  for (unsigned i = 0, e = fn.getNumResults(); i < e; ++i)
    if (fn.getResultAttr(i, kGradAttr))
      gradients.insert(ret.getOperand(i));
  fn.walk([&](AdamWOp adamw) { gradients.insert(adamw.getGrad()); });
  return gradients;
}

namespace {
/// Ops that carry a gradient towards its reduced form unchanged in kind:
/// collectives, FSDP2's padding of uneven shards, and views.
bool carriesGradient(Operation *op) {
  return isa<shard::ShardDialect>(op->getDialect()) || isa<PadOp>(op) ||
         isa<ViewLikeOpInterface>(op);
}
} // namespace

llvm::DenseSet<Value> gradientValues(func::FuncOp fn) {
  llvm::DenseSet<Value> gradients;
  llvm::SmallVector<Value> work;
  for (Value gradient : stepGradients(fn))
    work.push_back(gradient);
  while (!work.empty()) {
    Value value = work.pop_back_val();
    if (!gradients.insert(value).second)
      continue;
    if (Operation *def = value.getDefiningOp(); def && carriesGradient(def))
      for (Value operand : def->getOperands())
        if (isa<RankedTensorType>(operand.getType()))
          work.push_back(operand);
  }
  return gradients;
}

ValuePrecision::ValuePrecision(func::FuncOp fn, const PrecisionPolicy &policy)
    : policy_(policy), reduced_(gradientValues(fn)) {}

int64_t ValuePrecision::elementBytes(Value value) const {
  auto type = dyn_cast<RankedTensorType>(value.getType());
  if (!type)
    return 0;
  Type element = type.getElementType();
  int64_t irBytes = (element.getIntOrFloatBitWidth() + 7) / 8;
  if (!isa<FloatType>(element))
    return irBytes;
  if (auto arg = dyn_cast<BlockArgument>(value)) {
    auto fn = dyn_cast<func::FuncOp>(arg.getOwner()->getParentOp());
    if (fn && fn.getArgAttr(arg.getArgNumber(), kParamAttr))
      return policy_.masterBytes;
    if (fn && fn.getArgAttr(arg.getArgNumber(), kStateAttr))
      return policy_.optimizerBytes;
    // A pipeline stage's activations and cotangents from another stage, and
    // what its forward kept for its backward: computed values.
    for (llvm::StringRef role : {kTransferAttr, kCotangentAttr, kResidualAttr})
      if (fn && fn.getArgAttr(arg.getArgNumber(), role))
        return policy_.computeBytes;
    return irBytes;
  }
  if (reduced_.contains(value))
    return policy_.reduceBytes;
  Operation *def = value.getDefiningOp();
  if (auto tied = dyn_cast<TiedOperandOpInterface>(def))
    if (std::optional<unsigned> operand =
            tied.getTiedOperand(cast<OpResult>(value).getResultNumber()))
      return elementBytes(def->getOperand(*operand));
  return policy_.computeBytes;
}

int64_t ValuePrecision::bytes(Value value) const {
  auto type = dyn_cast<RankedTensorType>(value.getType());
  return type ? type.getNumElements() * elementBytes(value) : 0;
}

int64_t ValuePrecision::bytes(ValueRange values) const {
  int64_t total = 0;
  for (Value value : values)
    total += bytes(value);
  return total;
}

} // namespace kiln
