//===- ProgramCost.cpp - Static cost of a kiln function -------------------===//

#include "kiln/Planner/ProgramCost.h"
#include "kiln/Dialect/Kiln/IR/KilnOps.h"

using namespace mlir;

namespace kiln {

ProgramCost programCost(func::FuncOp fn) {
  ProgramCost cost;
  for (unsigned i = 0, e = fn.getNumArguments(); i < e; ++i)
    if (fn.getArgAttr(i, kParamAttr)) {
      auto type = cast<RankedTensorType>(fn.getArgumentTypes()[i]);
      cost.parameterCount += type.getNumElements();
      cost.parameterBytes += tensorBytes(type);
    }
  fn.walk([&](Operation *op) {
    if (op == fn.getOperation() || isa<func::ReturnOp>(op))
      return;
    ++cost.opCounts[op->getName().getStringRef().str()];
    if (auto c = dyn_cast<CostOpInterface>(op)) {
      cost.flops += c.getFlops();
      cost.bytesRead += c.getBytesRead();
      cost.bytesWritten += c.getBytesWritten();
    }
  });
  return cost;
}

} // namespace kiln
