//===- ModulePath.cpp - The layer or top-level module of an fqn -----------===//

#include "kiln/Planner/ModulePath.h"
#include "kiln/Dialect/Kiln/IR/KilnOps.h"

namespace kiln {

std::string moduleKey(llvm::StringRef fqn) {
  if (fqn.starts_with("layers.")) {
    size_t dot = fqn.find('.', 7);
    return fqn.substr(0, dot).str();
  }
  return fqn.substr(0, fqn.find('.')).str();
}

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
