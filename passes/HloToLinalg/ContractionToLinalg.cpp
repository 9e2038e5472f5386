//===- ContractionToLinalg.cpp - hlo dot_general and reduce -> linalg ------===//
//
// dot_general becomes linalg.matmul or linalg.batch_matmul where its
// dimension numbers are theirs, else a linalg.generic with XLA's result
// order (batch, lhs free, rhs free); both accumulate in the result type into
// a zero-filled tensor. reduce becomes linalg.reduce into a tensor filled
// with the init value (float sums in f64).
//
//===----------------------------------------------------------------------===//

#include "HloToLinalg.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

using namespace mlir;
using namespace kiln;
using namespace kiln::hlo_to_linalg;

namespace {

/// `x` in the accumulation type (a bf16 operand of a float32 dot: XLA's
/// preferred element type).
Value widened(OpBuilder &b, Location loc, Value x, Type type) {
  return x.getType() == type ? x : Value(arith::ExtFOp::create(b, loc, type, x));
}

struct DotGeneralToLinalg : OpConversionPattern<hlo::DotGeneralOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(hlo::DotGeneralOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    auto type = cast<RankedTensorType>(op.getType());
    Location loc = op.getLoc();
    Type element = type.getElementType();
    Value zero = arith::ConstantOp::create(rewriter, loc, element, rewriter.getZeroAttr(element));
    Value init = buildFilled(rewriter, loc, type, zero);
    auto lhsType = cast<RankedTensorType>(op.getLhs().getType());
    auto rhsType = cast<RankedTensorType>(op.getRhs().getType());
    ArrayRef<int64_t> lb = op.getLhsBatchingDimensions(), rb = op.getRhsBatchingDimensions(),
                      lc = op.getLhsContractingDimensions(),
                      rc = op.getRhsContractingDimensions();
    bool sameTypes = lhsType.getElementType() == element && rhsType.getElementType() == element;
    auto is = [](ArrayRef<int64_t> a, std::initializer_list<int64_t> b) {
      return a == ArrayRef<int64_t>(b);
    };
    Value lhs = adaptor.getLhs(), rhs = adaptor.getRhs();
    if (sameTypes && lb.empty() && lhsType.getRank() == 2 && rhsType.getRank() == 2 &&
        is(lc, {1}) && is(rc, {0})) {
      rewriter.replaceOpWithNewOp<linalg::MatmulOp>(op, ValueRange{lhs, rhs}, ValueRange{init});
      return success();
    }
    if (sameTypes && is(lb, {0}) && is(rb, {0}) && lhsType.getRank() == 3 &&
        rhsType.getRank() == 3 && is(lc, {2}) && is(rc, {1})) {
      rewriter.replaceOpWithNewOp<linalg::BatchMatmulOp>(op, ValueRange{lhs, rhs},
                                                         ValueRange{init});
      return success();
    }
    // Loop dimensions: the result's (batch, lhs free, rhs free), then the
    // contracting ones.
    int64_t batch = lb.size();
    int64_t lhsFree = lhsType.getRank() - batch - lc.size();
    int64_t loops = type.getRank() + lc.size();
    MLIRContext *context = rewriter.getContext();
    auto operandMap = [&](int64_t rank, ArrayRef<int64_t> batching, ArrayRef<int64_t> contracting,
                          int64_t freeStart) {
      SmallVector<AffineExpr> exprs;
      int64_t free = freeStart;
      for (int64_t d = 0; d < rank; ++d) {
        const int64_t *b = llvm::find(batching, d), *c = llvm::find(contracting, d);
        int64_t loop = b != batching.end()      ? b - batching.begin()
                       : c != contracting.end() ? type.getRank() + (c - contracting.begin())
                                                : free++;
        exprs.push_back(getAffineDimExpr(loop, context));
      }
      return AffineMap::get(loops, 0, exprs, context);
    };
    SmallVector<AffineExpr> resultExprs;
    for (int64_t d = 0; d < type.getRank(); ++d)
      resultExprs.push_back(getAffineDimExpr(d, context));
    SmallVector<AffineMap> maps{operandMap(lhsType.getRank(), lb, lc, batch),
                                operandMap(rhsType.getRank(), rb, rc, batch + lhsFree),
                                AffineMap::get(loops, 0, resultExprs, context)};
    SmallVector<utils::IteratorType> iterators(type.getRank(), utils::IteratorType::parallel);
    iterators.append(lc.size(), utils::IteratorType::reduction);
    rewriter.replaceOpWithNewOp<linalg::GenericOp>(
        op, TypeRange{type}, ValueRange{lhs, rhs}, ValueRange{init}, maps, iterators,
        [&](OpBuilder &b, Location l, ValueRange args) {
          Value product = arith::MulFOp::create(b, l, widened(b, l, args[0], element),
                                                widened(b, l, args[1], element));
          linalg::YieldOp::create(b, l, Value(arith::AddFOp::create(b, l, args[2], product)));
        });
    return success();
  }
};

/// A float sum accumulates in f64 (as the reference evaluator does): a
/// float32 running sum over the tens of thousands of squares in a gradient
/// norm drifts by 1e-5 relative, the check's tolerance.
struct ReduceToLinalg : OpConversionPattern<hlo::ReduceOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(hlo::ReduceOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    RankedTensorType type = convertedType(getTypeConverter(), op.getResult());
    Location loc = op.getLoc();
    hlo::Combiner combiner = op.getCombiner();
    bool isUnsigned = isUnsignedElement(op.getType());
    Type element = type.getElementType();
    auto floatType = dyn_cast<FloatType>(element);
    bool widen = floatType && floatType.getWidth() < 64 && combiner == hlo::Combiner::add;
    Type accumulator = widen ? rewriter.getF64Type() : element;
    Value init = extractScalar(rewriter, loc, adaptor.getInit());
    if (widen)
      init = arith::ExtFOp::create(rewriter, loc, accumulator, init);
    Value filled = buildFilled(rewriter, loc, type.clone(accumulator), init);
    // A linalg.generic with reduction iterators rather than linalg.reduce:
    // elementwise producers (a gradient norm's squares) fuse into it.
    auto operandType = cast<RankedTensorType>(adaptor.getOperand().getType());
    unsigned rank = operandType.getRank();
    ArrayRef<int64_t> reduced = op.getDimensions();
    SmallVector<utils::IteratorType> iterators;
    SmallVector<AffineExpr> kept;
    for (unsigned d = 0; d < rank; ++d) {
      bool isReduced = llvm::is_contained(reduced, int64_t(d));
      iterators.push_back(isReduced ? utils::IteratorType::reduction
                                    : utils::IteratorType::parallel);
      if (!isReduced)
        kept.push_back(rewriter.getAffineDimExpr(d));
    }
    SmallVector<AffineMap> maps{rewriter.getMultiDimIdentityMap(rank),
                                AffineMap::get(rank, 0, kept, rewriter.getContext())};
    auto reduce = linalg::GenericOp::create(
        rewriter, loc, TypeRange{filled.getType()}, ValueRange{adaptor.getOperand()},
        ValueRange{filled}, maps, iterators, [&](OpBuilder &b, Location l, ValueRange args) {
          Value x = widen ? Value(arith::ExtFOp::create(b, l, accumulator, args[0])) : args[0];
          linalg::YieldOp::create(b, l, combineScalars(b, l, combiner, args[1], x, isUnsigned));
        });
    Value result = reduce->getResult(0);
    if (widen)
      result = buildElementwise(rewriter, loc, type, {result},
                                [&](OpBuilder &b, Location l, ValueRange x) {
                                  return Value(arith::TruncFOp::create(b, l, element, x[0]));
                                });
    rewriter.replaceOp(op, result);
    return success();
  }
};

} // namespace

void kiln::hlo_to_linalg::populateContractionPatterns(const TypeConverter &converter,
                                                      RewritePatternSet &patterns) {
  patterns.add<DotGeneralToLinalg, ReduceToLinalg>(converter, patterns.getContext());
}
