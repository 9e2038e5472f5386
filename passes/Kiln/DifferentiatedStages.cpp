//===- DifferentiatedStages.cpp - A pipeline's stage functions ------------===//

#include "DifferentiatedStages.h"
#include "kiln/Dialect/Kiln/IR/KilnDialect.h"

namespace kiln {

llvm::SmallVector<mlir::func::FuncOp> differentiatedStages(mlir::ModuleOp module) {
  llvm::SmallVector<mlir::func::FuncOp> stages;
  for (auto fn : module.getOps<mlir::func::FuncOp>())
    if (fn->hasAttr(kStageAttr) && fn.getSymName().ends_with("_grad"))
      stages.push_back(fn);
  return stages;
}

llvm::SmallVector<mlir::func::FuncOp> stagesOrFunction(mlir::ModuleOp module, bool stages,
                                                       llvm::StringRef funcName) {
  if (stages)
    return differentiatedStages(module);
  if (auto fn = module.lookupSymbol<mlir::func::FuncOp>(funcName))
    return {fn};
  return {};
}

} // namespace kiln
