//===- ElementwiseToLinalg.cpp - hlo elementwise ops -> linalg -------------===//
//
// constant becomes arith.constant; iota and every elementwise op one
// linalg.generic whose body is the scalar op (arith, math).
//
//===----------------------------------------------------------------------===//

#include "HloToLinalg.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"

using namespace mlir;
using namespace kiln;
using namespace kiln::hlo_to_linalg;

namespace {

struct ConstantToArith : OpConversionPattern<hlo::ConstantOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(hlo::ConstantOp op, OpAdaptor,
                                ConversionPatternRewriter &rewriter) const override {
    auto dense = dyn_cast<DenseElementsAttr>(op.getValue());
    if (!dense)
      return op.emitError("compiled mode lowers dense constants only");
    RankedTensorType type = convertedType(getTypeConverter(), op.getResult());
    if (type != op.getType())
      dense = dense.bitcast(type.getElementType());
    rewriter.replaceOpWithNewOp<arith::ConstantOp>(op, type, dense);
    return success();
  }
};

struct IotaToGeneric : OpConversionPattern<hlo::IotaOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(hlo::IotaOp op, OpAdaptor,
                                ConversionPatternRewriter &rewriter) const override {
    RankedTensorType type = convertedType(getTypeConverter(), op.getResult());
    int64_t dim = op.getIotaDimension();
    bool isUnsigned = isUnsignedElement(op.getType());
    rewriter.replaceOp(op, buildElementwise(rewriter, op.getLoc(), type, {},
                                            [&](OpBuilder &b, Location loc, ValueRange) {
      Value index = linalg::IndexOp::create(b, loc, dim);
      Type element = type.getElementType();
      if (isa<IntegerType>(element))
        return isUnsigned ? Value(arith::IndexCastUIOp::create(b, loc, element, index))
                          : Value(arith::IndexCastOp::create(b, loc, element, index));
      Value i64 = arith::IndexCastOp::create(b, loc, b.getI64Type(), index);
      return Value(arith::SIToFPOp::create(b, loc, element, i64));
    }));
    return success();
  }
};

/// The scalar op of each elementwise hlo op, on float or integer elements
/// (`isUnsigned`: the hlo element type was ui32).
Value scalarOf(hlo::AddOp, OpBuilder &b, Location loc, ValueRange x, bool) {
  return isa<FloatType>(x[0].getType()) ? Value(arith::AddFOp::create(b, loc, x[0], x[1]))
                                        : Value(arith::AddIOp::create(b, loc, x[0], x[1]));
}
Value scalarOf(hlo::SubtractOp, OpBuilder &b, Location loc, ValueRange x, bool) {
  return isa<FloatType>(x[0].getType()) ? Value(arith::SubFOp::create(b, loc, x[0], x[1]))
                                        : Value(arith::SubIOp::create(b, loc, x[0], x[1]));
}
Value scalarOf(hlo::MultiplyOp, OpBuilder &b, Location loc, ValueRange x, bool) {
  return isa<FloatType>(x[0].getType()) ? Value(arith::MulFOp::create(b, loc, x[0], x[1]))
                                        : Value(arith::MulIOp::create(b, loc, x[0], x[1]));
}
Value scalarOf(hlo::DivideOp, OpBuilder &b, Location loc, ValueRange x, bool isUnsigned) {
  if (isa<FloatType>(x[0].getType()))
    return arith::DivFOp::create(b, loc, x[0], x[1]);
  return isUnsigned ? Value(arith::DivUIOp::create(b, loc, x[0], x[1]))
                    : Value(arith::DivSIOp::create(b, loc, x[0], x[1]));
}
Value scalarOf(hlo::MaximumOp, OpBuilder &b, Location loc, ValueRange x, bool isUnsigned) {
  return combineScalars(b, loc, hlo::Combiner::max, x[0], x[1], isUnsigned);
}
Value scalarOf(hlo::MinimumOp, OpBuilder &b, Location loc, ValueRange x, bool isUnsigned) {
  return combineScalars(b, loc, hlo::Combiner::min, x[0], x[1], isUnsigned);
}
Value scalarOf(hlo::PowerOp, OpBuilder &b, Location loc, ValueRange x, bool) {
  return math::PowFOp::create(b, loc, x[0], x[1]);
}
Value scalarOf(hlo::AndOp, OpBuilder &b, Location loc, ValueRange x, bool) {
  return arith::AndIOp::create(b, loc, x[0], x[1]);
}
Value scalarOf(hlo::ExpOp, OpBuilder &b, Location loc, ValueRange x, bool) {
  return math::ExpOp::create(b, loc, x[0]);
}
Value scalarOf(hlo::LogOp, OpBuilder &b, Location loc, ValueRange x, bool) {
  return math::LogOp::create(b, loc, x[0]);
}
Value scalarOf(hlo::RsqrtOp, OpBuilder &b, Location loc, ValueRange x, bool) {
  return math::RsqrtOp::create(b, loc, x[0]);
}
Value scalarOf(hlo::SqrtOp, OpBuilder &b, Location loc, ValueRange x, bool) {
  return math::SqrtOp::create(b, loc, x[0]);
}
Value scalarOf(hlo::CosineOp, OpBuilder &b, Location loc, ValueRange x, bool) {
  return math::CosOp::create(b, loc, x[0]);
}
Value scalarOf(hlo::SineOp, OpBuilder &b, Location loc, ValueRange x, bool) {
  return math::SinOp::create(b, loc, x[0]);
}
Value scalarOf(hlo::NegateOp, OpBuilder &b, Location loc, ValueRange x, bool) {
  Type type = x[0].getType();
  if (isa<FloatType>(type))
    return arith::NegFOp::create(b, loc, x[0]);
  Value zero = arith::ConstantOp::create(b, loc, type, b.getZeroAttr(type));
  return arith::SubIOp::create(b, loc, zero, x[0]);
}
/// XLA's sign: -1, 0 or 1 with the sign of zero kept, NaN for NaN.
Value scalarOf(hlo::SignOp, OpBuilder &b, Location loc, ValueRange x, bool) {
  Type type = x[0].getType();
  Value zero = arith::ConstantOp::create(b, loc, type, b.getFloatAttr(type, 0.0));
  Value one = arith::ConstantOp::create(b, loc, type, b.getFloatAttr(type, 1.0));
  Value isZeroOrNan =
      arith::CmpFOp::create(b, loc, arith::CmpFPredicate::UEQ, x[0], zero);
  Value unit = math::CopySignOp::create(b, loc, one, x[0]);
  return arith::SelectOp::create(b, loc, isZeroOrNan, x[0], unit);
}

template <typename HloOp>
struct ElementwiseToGeneric : OpConversionPattern<HloOp> {
  using OpConversionPattern<HloOp>::OpConversionPattern;
  LogicalResult matchAndRewrite(HloOp op, typename HloOp::Adaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    if (std::is_same_v<HloOp, hlo::PowerOp> &&
        !isa<FloatType>(getElementTypeOrSelf(op->getResult(0).getType())))
      return op.emitError("compiled mode lowers power on floats only");
    RankedTensorType type = convertedType(this->getTypeConverter(), op->getResult(0));
    bool isUnsigned = isUnsignedElement(op->getOperand(0).getType());
    rewriter.replaceOp(op, buildElementwise(rewriter, op.getLoc(), type, adaptor.getOperands(),
                                            [&](OpBuilder &b, Location loc, ValueRange x) {
                                              return scalarOf(op, b, loc, x, isUnsigned);
                                            }));
    return success();
  }
};

/// XLA's convert: float <-> float, integer <-> float (pred as 0/1), integer
/// widths (sign- or zero-extended as the source says), to pred as != 0.
Value convertScalar(OpBuilder &b, Location loc, Value x, Type to, bool fromUnsigned) {
  Type from = x.getType();
  if (from == to)
    return x;
  auto fromFloat = dyn_cast<FloatType>(from);
  auto toFloat = dyn_cast<FloatType>(to);
  bool fromUnsignedInt = fromUnsigned || from.isInteger(1);
  if (to.isInteger(1)) {
    Value zero = arith::ConstantOp::create(b, loc, from, b.getZeroAttr(from));
    return fromFloat ? Value(arith::CmpFOp::create(b, loc, arith::CmpFPredicate::UNE, x, zero))
                     : Value(arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne, x, zero));
  }
  if (fromFloat && toFloat)
    return fromFloat.getWidth() < toFloat.getWidth()
               ? Value(arith::ExtFOp::create(b, loc, to, x))
               : Value(arith::TruncFOp::create(b, loc, to, x));
  if (toFloat)
    return fromUnsignedInt ? Value(arith::UIToFPOp::create(b, loc, to, x))
                           : Value(arith::SIToFPOp::create(b, loc, to, x));
  if (fromFloat)
    return arith::FPToSIOp::create(b, loc, to, x);
  unsigned fromWidth = from.getIntOrFloatBitWidth(), toWidth = to.getIntOrFloatBitWidth();
  if (fromWidth > toWidth)
    return arith::TruncIOp::create(b, loc, to, x);
  if (fromWidth == toWidth)
    return x; // s32 <-> u32: the same bits
  return fromUnsignedInt ? Value(arith::ExtUIOp::create(b, loc, to, x))
                         : Value(arith::ExtSIOp::create(b, loc, to, x));
}

struct ConvertToGeneric : OpConversionPattern<hlo::ConvertOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(hlo::ConvertOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    RankedTensorType type = convertedType(getTypeConverter(), op.getResult());
    bool fromUnsigned = isUnsignedElement(op.getOperand().getType());
    rewriter.replaceOp(op, buildElementwise(rewriter, op.getLoc(), type, adaptor.getOperands(),
                                            [&](OpBuilder &b, Location loc, ValueRange x) {
      return convertScalar(b, loc, x[0], type.getElementType(), fromUnsigned);
    }));
    return success();
  }
};

struct CompareToGeneric : OpConversionPattern<hlo::CompareOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(hlo::CompareOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    RankedTensorType type = convertedType(getTypeConverter(), op.getResult());
    bool isUnsigned = isUnsignedElement(op.getLhs().getType());
    hlo::ComparisonDirection direction = op.getComparisonDirection();
    rewriter.replaceOp(op, buildElementwise(rewriter, op.getLoc(), type, adaptor.getOperands(),
                                            [&](OpBuilder &b, Location loc, ValueRange x) {
      using D = hlo::ComparisonDirection;
      if (isa<FloatType>(x[0].getType())) {
        // Ordered, as XLA's default: a NaN compares false, except NE.
        arith::CmpFPredicate p = direction == D::EQ   ? arith::CmpFPredicate::OEQ
                                 : direction == D::NE ? arith::CmpFPredicate::UNE
                                 : direction == D::GE ? arith::CmpFPredicate::OGE
                                 : direction == D::GT ? arith::CmpFPredicate::OGT
                                 : direction == D::LE ? arith::CmpFPredicate::OLE
                                                      : arith::CmpFPredicate::OLT;
        return Value(arith::CmpFOp::create(b, loc, p, x[0], x[1]));
      }
      bool u = isUnsigned || x[0].getType().isInteger(1);
      arith::CmpIPredicate p =
          direction == D::EQ   ? arith::CmpIPredicate::eq
          : direction == D::NE ? arith::CmpIPredicate::ne
          : direction == D::GE ? (u ? arith::CmpIPredicate::uge : arith::CmpIPredicate::sge)
          : direction == D::GT ? (u ? arith::CmpIPredicate::ugt : arith::CmpIPredicate::sgt)
          : direction == D::LE ? (u ? arith::CmpIPredicate::ule : arith::CmpIPredicate::sle)
                               : (u ? arith::CmpIPredicate::ult : arith::CmpIPredicate::slt);
      return Value(arith::CmpIOp::create(b, loc, p, x[0], x[1]));
    }));
    return success();
  }
};

struct SelectToGeneric : OpConversionPattern<hlo::SelectOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(hlo::SelectOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    RankedTensorType type = convertedType(getTypeConverter(), op.getResult());
    rewriter.replaceOp(op, buildElementwise(rewriter, op.getLoc(), type, adaptor.getOperands(),
                                            [&](OpBuilder &b, Location loc, ValueRange x) {
      return Value(arith::SelectOp::create(b, loc, x[0], x[1], x[2]));
    }));
    return success();
  }
};

} // namespace

void kiln::hlo_to_linalg::populateElementwisePatterns(const TypeConverter &converter,
                                                      RewritePatternSet &patterns) {
  patterns.add<ConstantToArith, IotaToGeneric, ConvertToGeneric, CompareToGeneric,
               SelectToGeneric, ElementwiseToGeneric<hlo::AddOp>,
               ElementwiseToGeneric<hlo::SubtractOp>, ElementwiseToGeneric<hlo::MultiplyOp>,
               ElementwiseToGeneric<hlo::DivideOp>, ElementwiseToGeneric<hlo::MaximumOp>,
               ElementwiseToGeneric<hlo::MinimumOp>, ElementwiseToGeneric<hlo::PowerOp>,
               ElementwiseToGeneric<hlo::AndOp>, ElementwiseToGeneric<hlo::ExpOp>,
               ElementwiseToGeneric<hlo::LogOp>, ElementwiseToGeneric<hlo::RsqrtOp>,
               ElementwiseToGeneric<hlo::SqrtOp>, ElementwiseToGeneric<hlo::NegateOp>,
               ElementwiseToGeneric<hlo::CosineOp>, ElementwiseToGeneric<hlo::SineOp>,
               ElementwiseToGeneric<hlo::SignOp>>(converter, patterns.getContext());
}
