//===- ModulePath.cpp - The layer or top-level module of an fqn -----------===//

#include "kiln/Planner/ModulePath.h"
#include "kiln/Config/PipelineStages.h"
#include "kiln/Dialect/Kiln/IR/KilnOps.h"

namespace kiln {

std::string moduleKey(llvm::StringRef fqn) { return std::string(topModule(fqn)); }

std::string moduleKeyOf(mlir::Value value) {
  for (int hops = 0; hops < 8; ++hops) {
    if (llvm::StringRef fqn = owningModule(value); !fqn.empty())
      return moduleKey(fqn);
    mlir::Operation *def = value.getDefiningOp();
    if (!def || def->getNumOperands() == 0)
      break;
    value = def->getOperand(0);
  }
  return "";
}

} // namespace kiln
