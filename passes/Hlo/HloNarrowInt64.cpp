//===- HloNarrowInt64.cpp - kiln-hlo-narrow-int64: s32 for every integer -===//
//
// Every s64 value of the hlo module becomes s32 (see Passes.td): argument,
// result and instruction types, constants rewritten (refused when a value
// does not fit), and the converts between s32 and s64 that are left with
// one type folded away.
//
//===----------------------------------------------------------------------===//

#include "kiln/Dialect/Hlo/IR/HloOps.h"
#include "kiln/Passes/Hlo/Passes.h"

#include <limits>

namespace kiln {
#define GEN_PASS_DEF_HLONARROWINT64
#include "kiln/Passes/Hlo/Passes.h.inc"
} // namespace kiln

using namespace mlir;
using namespace kiln;

namespace {

/// `type` with s32 in place of an s64 element type, or null if it has none.
RankedTensorType narrowed(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!tensor || !tensor.getElementType().isSignlessInteger(64))
    return {};
  return tensor.clone(IntegerType::get(type.getContext(), 32));
}

LogicalResult narrowConstant(hlo::ConstantOp op, RankedTensorType type) {
  auto dense = dyn_cast<DenseIntElementsAttr>(op.getValue());
  if (!dense)
    return op.emitOpError("kiln-hlo-narrow-int64: an s64 constant must be dense");
  SmallVector<int32_t> values;
  for (APInt v : dense.getValues<APInt>()) {
    int64_t x = v.getSExtValue();
    if (x < std::numeric_limits<int32_t>::min() || x > std::numeric_limits<int32_t>::max())
      return op.emitOpError() << "kiln-hlo-narrow-int64: constant value " << x
                              << " does not fit in s32";
    values.push_back(int32_t(x));
  }
  op.setValueAttr(DenseIntElementsAttr::get(type, ArrayRef<int32_t>(values)));
  op.getResult().setType(type);
  return success();
}

LogicalResult narrowFunction(func::FuncOp func) {
  Block &body = func.getBody().front();
  for (BlockArgument arg : body.getArguments())
    if (RankedTensorType t = narrowed(arg.getType()))
      arg.setType(t);
  WalkResult walk = func.walk([&](Operation *op) {
    if (auto constant = dyn_cast<hlo::ConstantOp>(op))
      if (RankedTensorType t = narrowed(constant.getType()))
        return failed(narrowConstant(constant, t)) ? WalkResult::interrupt()
                                                   : WalkResult::advance();
    for (Value r : op->getResults())
      if (RankedTensorType t = narrowed(r.getType()))
        r.setType(t);
    return WalkResult::advance();
  });
  if (walk.wasInterrupted())
    return failure();
  // A convert that only widened s32 to s64 (or narrowed back) is now s32 to s32.
  func.walk([](hlo::ConvertOp op) {
    if (op.getOperand().getType() == op.getType()) {
      op.getResult().replaceAllUsesWith(op.getOperand());
      op.erase();
    }
  });
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  func.setFunctionType(FunctionType::get(func.getContext(), body.getArgumentTypes(),
                                         ret.getOperandTypes()));
  return success();
}

struct HloNarrowInt64Pass : kiln::impl::HloNarrowInt64Base<HloNarrowInt64Pass> {
  void runOnOperation() override {
    for (func::FuncOp func : getOperation().getOps<func::FuncOp>())
      if (failed(narrowFunction(func)))
        return signalPassFailure();
  }
};

} // namespace
