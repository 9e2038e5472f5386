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

// The cotangents each backward op reads; its other operands are saved
// forward values, which do not make the result zero.
SmallVector<Value> cotangents(EmbeddingBackwardOp op) { return {op.getGrad()}; }
SmallVector<Value> cotangents(RmsNormBackwardOp op) { return {op.getGrad()}; }
SmallVector<Value> cotangents(LinearBackwardDataOp op) { return {op.getGrad()}; }
SmallVector<Value> cotangents(LinearBackwardWeightOp op) { return {op.getGrad()}; }
SmallVector<Value> cotangents(RopeBackwardOp op) { return {op.getQGrad(), op.getKGrad()}; }
SmallVector<Value> cotangents(AttentionBackwardOp op) { return {op.getOutGrad()}; }
SmallVector<Value> cotangents(SwigluBackwardOp op) { return {op.getOutGrad()}; }
SmallVector<Value> cotangents(CrossEntropyBackwardOp op) { return {op.getLossGrad()}; }

/// Replaces a backward op whose cotangents are all zero by zero constants
/// named `<fqn>.zero_grad`, as the VJPs name the zeros they create.
template <typename OpT> struct ZeroCotangent : OpRewritePattern<OpT> {
  using OpRewritePattern<OpT>::OpRewritePattern;
  LogicalResult matchAndRewrite(OpT op, PatternRewriter &rewriter) const override {
    if (!llvm::all_of(cotangents(op), isZeroSplat))
      return failure();
    SmallVector<Value> zeros;
    for (Value result : op->getResults()) {
      auto type = cast<RankedTensorType>(result.getType());
      auto zero = SplatElementsAttr::get(type, rewriter.getFloatAttr(type.getElementType(), 0));
      zeros.push_back(ConstantOp::create(rewriter, op.getLoc(), zero,
                                         rewriter.getStringAttr(op.getFqn() + ".zero_grad")));
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

template <typename OpT> static void addZeroCotangent(RewritePatternSet &patterns,
                                                     MLIRContext *context) {
  patterns.add<ZeroCotangent<OpT>>(context);
}

void EmbeddingBackwardOp::getCanonicalizationPatterns(RewritePatternSet &p, MLIRContext *c) {
  addZeroCotangent<EmbeddingBackwardOp>(p, c);
}
void RmsNormBackwardOp::getCanonicalizationPatterns(RewritePatternSet &p, MLIRContext *c) {
  addZeroCotangent<RmsNormBackwardOp>(p, c);
}
void LinearBackwardDataOp::getCanonicalizationPatterns(RewritePatternSet &p, MLIRContext *c) {
  addZeroCotangent<LinearBackwardDataOp>(p, c);
}
void LinearBackwardWeightOp::getCanonicalizationPatterns(RewritePatternSet &p,
                                                         MLIRContext *c) {
  addZeroCotangent<LinearBackwardWeightOp>(p, c);
}
void RopeBackwardOp::getCanonicalizationPatterns(RewritePatternSet &p, MLIRContext *c) {
  addZeroCotangent<RopeBackwardOp>(p, c);
}
void AttentionBackwardOp::getCanonicalizationPatterns(RewritePatternSet &p, MLIRContext *c) {
  addZeroCotangent<AttentionBackwardOp>(p, c);
}
void SwigluBackwardOp::getCanonicalizationPatterns(RewritePatternSet &p, MLIRContext *c) {
  addZeroCotangent<SwigluBackwardOp>(p, c);
}
void CrossEntropyBackwardOp::getCanonicalizationPatterns(RewritePatternSet &p,
                                                         MLIRContext *c) {
  addZeroCotangent<CrossEntropyBackwardOp>(p, c);
}
