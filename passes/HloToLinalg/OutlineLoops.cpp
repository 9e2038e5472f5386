//===- OutlineLoops.cpp - kiln-outline-loops -------------------------------===//
//
// Each top-level loop nest of a function as a function of its own, so that
// LLVM's optimizer works on small functions (Passes.td says why).
//
//===----------------------------------------------------------------------===//

#include "kiln/Passes/HloToLinalg/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Transforms/RegionUtils.h"

namespace kiln {
#define GEN_PASS_DEF_OUTLINELOOPS
#include "kiln/Passes/HloToLinalg/Passes.h.inc"
} // namespace kiln

using namespace mlir;

namespace {

/// Values a loop may recompute instead of taking them as arguments.
bool isClonable(Value v) {
  Operation *def = v.getDefiningOp();
  return def && def->getNumOperands() == 0 && def->getNumRegions() == 0 &&
         (def->hasTrait<OpTrait::ConstantLike>() || isa<memref::GetGlobalOp>(def));
}

void outline(scf::ForOp loop, func::FuncOp parent, unsigned index, SymbolTable &symbols) {
  llvm::SetVector<Value> above;
  getUsedValuesDefinedAbove(loop->getRegions(), above);
  // The bounds and the step are operands of the loop, not of its region.
  for (Value v : loop->getOperands())
    above.insert(v);
  SmallVector<Value> arguments, cloned;
  for (Value v : above)
    (isClonable(v) ? cloned : arguments).push_back(v);
  OpBuilder b(parent);
  auto type = b.getFunctionType(ValueRange(arguments).getTypes(), {});
  auto func = func::FuncOp::create(b, loop.getLoc(),
                                   (parent.getName() + "_loop" + Twine(index)).str(), type);
  func.setPrivate();
  func->setAttr("passthrough", b.getArrayAttr({b.getStringAttr("noinline")}));
  symbols.insert(func);
  Block *entry = func.addEntryBlock();
  OpBuilder inside = OpBuilder::atBlockBegin(entry);
  IRMapping mapping;
  for (auto [v, arg] : llvm::zip(arguments, entry->getArguments()))
    mapping.map(v, arg);
  for (Value v : cloned)
    mapping.map(v, inside.clone(*v.getDefiningOp())->getResult(0));
  inside.clone(*loop, mapping);
  func::ReturnOp::create(inside, loop.getLoc());
  OpBuilder at(loop);
  func::CallOp::create(at, loop.getLoc(), func, arguments);
  loop.erase();
}

struct OutlineLoopsPass : kiln::impl::OutlineLoopsBase<OutlineLoopsPass> {
  void runOnOperation() override {
    SymbolTable symbols(getOperation());
    SmallVector<func::FuncOp> funcs(getOperation().getOps<func::FuncOp>());
    for (func::FuncOp parent : funcs) {
      if (parent.isExternal())
        continue;
      SmallVector<scf::ForOp> loops;
      for (auto loop : parent.getBody().front().getOps<scf::ForOp>())
        if (loop.getNumResults() == 0)
          loops.push_back(loop);
      for (auto [i, loop] : llvm::enumerate(loops))
        outline(loop, parent, unsigned(i), symbols);
    }
  }
};

} // namespace
