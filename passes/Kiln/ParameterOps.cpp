//===- ParameterOps.cpp - Ops of parameters alone -------------------------===//

#include "ParameterOps.h"

#include "kiln/Dialect/Kiln/IR/KilnDialect.h"

using namespace mlir;

namespace kiln {

llvm::DenseSet<Operation *> opsOfParametersAlone(func::FuncOp fn, ArrayRef<Operation *> ops) {
  llvm::DenseSet<Operation *> ofParameters;
  for (Operation *op : ops)
    if (llvm::all_of(op->getOperands(), [&](Value v) {
          auto arg = dyn_cast<BlockArgument>(v);
          return arg ? bool(fn.getArgAttr(arg.getArgNumber(), kParamAttr))
                     : ofParameters.contains(v.getDefiningOp());
        }))
      ofParameters.insert(op);
  return ofParameters;
}

} // namespace kiln
