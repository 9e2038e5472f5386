//===- KilnCanonicalize.cpp - Folds that remove real work -----------------===//
//
// A zero cotangent (an unused result's gradient, a constant's) makes a whole
// backward op produce zeros, and adding zeros changes nothing. These folds
// let --canonicalize drop that work before any target runs it.
//
//===----------------------------------------------------------------------===//

#include "kiln/Dialect/Kiln/IR/KilnOps.h"

#include "mlir/IR/PatternMatch.h"

using namespace mlir;
using namespace kiln;

namespace {

bool isZeroSplat(Value value) {
  auto constant = value.getDefiningOp<ConstantOp>();
  auto splat = constant ? dyn_cast<SplatElementsAttr>(constant.getValue()) : nullptr;
  return splat && splat.getSplatValue<APFloat>().isZero();
}

/// Replaces a backward op whose cotangents are all zero by zero constants
/// named `<fqn>.zero_grad`, as the VJPs name the zeros they create.
struct ZeroCotangent : OpInterfaceRewritePattern<BackwardOpInterface> {
  using OpInterfaceRewritePattern::OpInterfaceRewritePattern;
  LogicalResult matchAndRewrite(BackwardOpInterface op,
                                PatternRewriter &rewriter) const override {
    if (!llvm::all_of(op.getCotangents(), isZeroSplat))
      return failure();
    auto fqn = op->getAttrOfType<StringAttr>("fqn");
    SmallVector<Value> zeros;
    for (Value result : op->getResults()) {
      auto type = cast<RankedTensorType>(result.getType());
      auto zero = SplatElementsAttr::get(type, rewriter.getFloatAttr(type.getElementType(), 0));
      zeros.push_back(ConstantOp::create(rewriter, op.getLoc(), zero,
                                         rewriter.getStringAttr(fqn.str() + ".zero_grad")));
    }
    rewriter.replaceOp(op, zeros);
    return success();
  }
};

} // namespace

OpFoldResult AddOp::fold(FoldAdaptor) {
  if (isZeroSplat(getRhs()))
    return getLhs();
  if (isZeroSplat(getLhs()))
    return getRhs();
  return {};
}

void KilnDialect::getCanonicalizationPatterns(RewritePatternSet &patterns) const {
  patterns.add<ZeroCotangent>(getContext());
}
