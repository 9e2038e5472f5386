//===- HloSinkConverts.cpp - kiln-hlo-sink-converts: explicit bf16 in HLO -===//
//
// kiln.cast lowers to convert(convert(x, bf16), f32); these exact rewrites
// make the bf16 values what all-gathers move and dots multiply (see
// Passes.td). Every rewrite leaves each element's value unchanged.
//
//===----------------------------------------------------------------------===//

#include "kiln/Dialect/Hlo/IR/HloOps.h"
#include "kiln/Passes/Hlo/Passes.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace kiln {
#define GEN_PASS_DEF_HLOSINKCONVERTS
#include "kiln/Passes/Hlo/Passes.h.inc"
} // namespace kiln

using namespace mlir;
using namespace kiln;

namespace {

Type elementOf(Value v) { return cast<RankedTensorType>(v.getType()).getElementType(); }

/// A convert from a float type to a wider one, or from an integer type to
/// a wider one (exact: HLO integers are signed, so it sign-extends).
bool isWidening(hlo::ConvertOp op) {
  Type from = elementOf(op.getOperand()), to = elementOf(op.getResult());
  bool floats = isa<FloatType>(from) && isa<FloatType>(to);
  bool integers = from.isSignlessInteger() && to.isSignlessInteger();
  return (floats || integers) && from.getIntOrFloatBitWidth() < to.getIntOrFloatBitWidth();
}

/// isWidening from a float type.
bool isFloatWidening(hlo::ConvertOp op) {
  return isWidening(op) && isa<FloatType>(elementOf(op.getOperand()));
}

/// `op` (data movement, its data in operand 0 and one result) rebuilt on
/// `data`, its result of `data`'s element type.
Value moveAs(PatternRewriter &rw, Operation *op, Value data) {
  Operation *moved = rw.clone(*op);
  moved->setOperand(0, data);
  auto type = cast<RankedTensorType>(op->getResult(0).getType());
  moved->getResult(0).setType(type.clone(elementOf(data)));
  return moved->getResult(0);
}

/// OpT(convert_wide(x)) -> convert_wide(OpT(x)): fewer bytes moved.
template <typename OpT> struct SinkWidening : OpRewritePattern<OpT> {
  using OpRewritePattern<OpT>::OpRewritePattern;
  LogicalResult matchAndRewrite(OpT op, PatternRewriter &rw) const override {
    auto widen = op->getOperand(0).template getDefiningOp<hlo::ConvertOp>();
    if (!widen || !isWidening(widen))
      return failure();
    Value narrow = moveAs(rw, op, widen.getOperand());
    rw.replaceOpWithNewOp<hlo::ConvertOp>(op, op->getResult(0).getType(), narrow);
    return success();
  }
};

/// pad(convert_wide(x), c) -> convert_wide(pad(x, c')) when the padding
/// value c is a constant exact in x's type (the dispatcher's zero rows).
struct SinkWideningPad : OpRewritePattern<hlo::PadOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(hlo::PadOp op, PatternRewriter &rw) const override {
    auto widen = op.getOperand().getDefiningOp<hlo::ConvertOp>();
    auto padding = op.getPaddingValue().getDefiningOp<hlo::ConstantOp>();
    auto dense = padding ? dyn_cast<DenseElementsAttr>(padding.getValue()) : nullptr;
    if (!widen || !isFloatWidening(widen) || !dense)
      return failure();
    auto narrow = cast<FloatType>(elementOf(widen.getOperand()));
    APFloat value = dense.getSplatValue<APFloat>();
    bool inexact = false;
    if (value.convert(narrow.getFloatSemantics(), APFloat::rmNearestTiesToEven, &inexact) !=
            APFloat::opOK ||
        inexact)
      return failure();
    auto scalar = RankedTensorType::get({}, narrow);
    rw.setInsertionPoint(op);
    Value c = hlo::ConstantOp::create(rw, padding.getLoc(), scalar,
                                      cast<ElementsAttr>(DenseElementsAttr::get(scalar, value)));
    Value narrowPad = moveAs(rw, op, widen.getOperand());
    narrowPad.getDefiningOp()->setOperand(1, c);
    rw.replaceOpWithNewOp<hlo::ConvertOp>(op, op.getType(), narrowPad);
    return success();
  }
};

/// convert_narrow(OpT(y)) -> OpT(convert_narrow(y)) when the convert is OpT's
/// only use (else the move would run twice).
struct HoistNarrowing : OpRewritePattern<hlo::ConvertOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(hlo::ConvertOp op, PatternRewriter &rw) const override {
    Operation *move = op.getOperand().getDefiningOp();
    auto to = dyn_cast<FloatType>(elementOf(op.getResult()));
    auto from = dyn_cast<FloatType>(elementOf(op.getOperand()));
    if (!move || !to || !from || to.getWidth() >= from.getWidth() || !move->hasOneUse() ||
        !isa<hlo::AllGatherOp, hlo::AllToAllOp, hlo::ReshapeOp, hlo::TransposeOp,
             hlo::BroadcastInDimOp, hlo::SliceOp, hlo::DynamicSliceOp>(move))
      return failure();
    rw.setInsertionPoint(move);
    auto type = cast<RankedTensorType>(move->getOperand(0).getType());
    Value narrowed = hlo::ConvertOp::create(rw, op.getLoc(), type.clone(to), move->getOperand(0));
    rw.replaceOp(op, moveAs(rw, move, narrowed));
    return success();
  }
};

/// convert(convert_wide(x)) back to x's type -> x.
struct FoldRoundTrip : OpRewritePattern<hlo::ConvertOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(hlo::ConvertOp op, PatternRewriter &rw) const override {
    auto widen = op.getOperand().getDefiningOp<hlo::ConvertOp>();
    if (!widen || !isWidening(widen) || widen.getOperand().getType() != op.getType())
      return failure();
    rw.replaceOp(op, widen.getOperand());
    return success();
  }
};

/// dot(convert_wide(a), convert_wide(b)) -> dot(a, b) with the wide result:
/// products of bf16 values are exact in float32, the sum accumulates there.
struct DotOfNarrow : OpRewritePattern<hlo::DotGeneralOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(hlo::DotGeneralOp op, PatternRewriter &rw) const override {
    auto lhs = op.getLhs().getDefiningOp<hlo::ConvertOp>();
    auto rhs = op.getRhs().getDefiningOp<hlo::ConvertOp>();
    if (!lhs || !rhs || !isFloatWidening(lhs) || !isFloatWidening(rhs) ||
        elementOf(lhs.getOperand()) != elementOf(rhs.getOperand()))
      return failure();
    rw.modifyOpInPlace(op, [&] {
      op.getLhsMutable().assign(lhs.getOperand());
      op.getRhsMutable().assign(rhs.getOperand());
    });
    return success();
  }
};

struct HloSinkConvertsPass : public kiln::impl::HloSinkConvertsBase<HloSinkConvertsPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<SinkWidening<hlo::AllGatherOp>, SinkWidening<hlo::AllToAllOp>,
                 SinkWidening<hlo::ReshapeOp>, SinkWidening<hlo::GatherOp>, SinkWideningPad,
                 SinkWidening<hlo::TransposeOp>, SinkWidening<hlo::BroadcastInDimOp>,
                 SinkWidening<hlo::SliceOp>, SinkWidening<hlo::DynamicSliceOp>, HoistNarrowing,
                 FoldRoundTrip, DotOfNarrow>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
  }
};

} // namespace
