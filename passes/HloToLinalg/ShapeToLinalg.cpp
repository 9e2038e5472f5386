//===- ShapeToLinalg.cpp - hlo data movement -> linalg and tensor ----------===//
//
// broadcast_in_dim and transpose become linalg ops (each writes a new
// tensor); reshape, slice, dynamic_slice, concatenate and pad become
// tensor ops, which bufferize to views and copies into one buffer; an
// opt-barrier is its operands (its job, keeping XLA from merging a
// recomputation into the forward, has no meaning once lowered).
//
//===----------------------------------------------------------------------===//

#include "HloToLinalg.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"

using namespace mlir;
using namespace kiln;
using namespace kiln::hlo_to_linalg;

namespace {

/// Static offsets, sizes and strides, as the tensor slice ops take them.
SmallVector<OpFoldResult> indexAttrs(OpBuilder &b, ArrayRef<int64_t> values) {
  return getAsIndexOpFoldResult(b.getContext(), values);
}

struct BroadcastInDimToGeneric : OpConversionPattern<hlo::BroadcastInDimOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(hlo::BroadcastInDimOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    RankedTensorType type = convertedType(getTypeConverter(), op.getResult());
    auto operandType = cast<RankedTensorType>(adaptor.getOperand().getType());
    MLIRContext *context = rewriter.getContext();
    // Operand dimension i reads result dimension broadcast_dimensions[i],
    // or 0 where a size-1 dimension is stretched.
    SmallVector<AffineExpr> exprs;
    for (auto [i, dim] : llvm::enumerate(op.getBroadcastDimensions()))
      exprs.push_back(operandType.getDimSize(i) == 1 && type.getDimSize(dim) != 1
                          ? getAffineConstantExpr(0, context)
                          : getAffineDimExpr(dim, context));
    unsigned rank = type.getRank();
    SmallVector<AffineMap> maps{AffineMap::get(rank, 0, exprs, context),
                                rewriter.getMultiDimIdentityMap(rank)};
    Value init = tensor::EmptyOp::create(rewriter, op.getLoc(), type.getShape(),
                                         type.getElementType());
    SmallVector<utils::IteratorType> iterators(rank, utils::IteratorType::parallel);
    rewriter.replaceOpWithNewOp<linalg::GenericOp>(
        op, TypeRange{type}, ValueRange{adaptor.getOperand()}, ValueRange{init}, maps, iterators,
        [](OpBuilder &b, Location loc, ValueRange args) {
          linalg::YieldOp::create(b, loc, args[0]);
        });
    return success();
  }
};

/// Row-major reshape: collapse to one dimension, expand to the result's
/// (either step left out where it would change nothing; a 0-d side uses the
/// empty reassociation).
struct ReshapeToTensor : OpConversionPattern<hlo::ReshapeOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(hlo::ReshapeOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    RankedTensorType type = convertedType(getTypeConverter(), op.getResult());
    Value value = adaptor.getOperand();
    auto operandType = cast<RankedTensorType>(value.getType());
    Location loc = op.getLoc();
    if (operandType == type) {
      rewriter.replaceOp(op, value);
      return success();
    }
    auto all = [](int64_t rank) {
      ReassociationIndices indices;
      for (int64_t i = 0; i < rank; ++i)
        indices.push_back(i);
      return SmallVector<ReassociationIndices>{indices};
    };
    if (type.getRank() == 0) {
      rewriter.replaceOpWithNewOp<tensor::CollapseShapeOp>(op, type, value,
                                                           SmallVector<ReassociationIndices>{});
      return success();
    }
    if (operandType.getRank() == 0) {
      rewriter.replaceOpWithNewOp<tensor::ExpandShapeOp>(op, type, value,
                                                         SmallVector<ReassociationIndices>{});
      return success();
    }
    if (operandType.getRank() > 1)
      value = tensor::CollapseShapeOp::create(
          rewriter, loc,
          RankedTensorType::get({operandType.getNumElements()}, type.getElementType()), value,
          all(operandType.getRank()));
    if (type.getRank() > 1)
      value = tensor::ExpandShapeOp::create(rewriter, loc, type, value, all(type.getRank()));
    rewriter.replaceOp(op, value);
    return success();
  }
};

struct TransposeToLinalg : OpConversionPattern<hlo::TransposeOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(hlo::TransposeOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    RankedTensorType type = convertedType(getTypeConverter(), op.getResult());
    Value init = tensor::EmptyOp::create(rewriter, op.getLoc(), type.getShape(),
                                         type.getElementType());
    auto transpose = linalg::TransposeOp::create(rewriter, op.getLoc(), adaptor.getOperand(),
                                                 init, op.getPermutation());
    rewriter.replaceOp(op, transpose->getResults());
    return success();
  }
};

struct SliceToTensor : OpConversionPattern<hlo::SliceOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(hlo::SliceOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    RankedTensorType type = convertedType(getTypeConverter(), op.getResult());
    rewriter.replaceOpWithNewOp<tensor::ExtractSliceOp>(
        op, type, adaptor.getOperand(), indexAttrs(rewriter, op.getStartIndices()),
        indexAttrs(rewriter, type.getShape()), indexAttrs(rewriter, op.getStrides()));
    return success();
  }
};

/// XLA clamps each start index into [0, dim - size].
struct DynamicSliceToTensor : OpConversionPattern<hlo::DynamicSliceOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(hlo::DynamicSliceOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    RankedTensorType type = convertedType(getTypeConverter(), op.getResult());
    auto operandType = cast<RankedTensorType>(op.getOperand().getType());
    Location loc = op.getLoc();
    SmallVector<OpFoldResult> offsets;
    for (auto [d, start] : llvm::enumerate(adaptor.getStartIndices()))
      offsets.push_back(clampedIndex(rewriter, loc, extractScalar(rewriter, loc, start),
                                     isUnsignedElement(op.getStartIndices()[d].getType()),
                                     operandType.getDimSize(d) - op.getSliceSizes()[d]));
    SmallVector<OpFoldResult> ones(type.getRank(), rewriter.getIndexAttr(1));
    rewriter.replaceOpWithNewOp<tensor::ExtractSliceOp>(op, type, adaptor.getOperand(), offsets,
                                                        indexAttrs(rewriter, type.getShape()),
                                                        ones);
    return success();
  }
};

struct ConcatenateToTensor : OpConversionPattern<hlo::ConcatenateOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(hlo::ConcatenateOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    RankedTensorType type = convertedType(getTypeConverter(), op.getResult());
    Location loc = op.getLoc();
    Value result =
        tensor::EmptyOp::create(rewriter, loc, type.getShape(), type.getElementType());
    int64_t dim = op.getDimension(), at = 0;
    SmallVector<OpFoldResult> ones(type.getRank(), rewriter.getIndexAttr(1));
    for (Value input : adaptor.getInputs()) {
      auto inputType = cast<RankedTensorType>(input.getType());
      SmallVector<int64_t> offsets(type.getRank(), 0);
      offsets[dim] = at;
      result = tensor::InsertSliceOp::create(rewriter, loc, input, result,
                                             indexAttrs(rewriter, offsets),
                                             indexAttrs(rewriter, inputType.getShape()), ones);
      at += inputType.getDimSize(dim);
    }
    rewriter.replaceOp(op, result);
    return success();
  }
};

/// XLA's pad: operand element i of a dimension lands at low + i * (interior
/// + 1); negative edge padding drops operand elements. The result is the
/// padding value everywhere, then the operand elements that land inside it
/// inserted with that stride.
struct PadToTensor : OpConversionPattern<hlo::PadOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(hlo::PadOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    RankedTensorType type = convertedType(getTypeConverter(), op.getResult());
    auto operandType = cast<RankedTensorType>(adaptor.getOperand().getType());
    Location loc = op.getLoc();
    Value result =
        buildFilled(rewriter, loc, type, extractScalar(rewriter, loc, adaptor.getPaddingValue()));
    SmallVector<int64_t> first, count, at, stride;
    for (int64_t d = 0; d < type.getRank(); ++d) {
      int64_t low = op.getEdgePaddingLow()[d], step = op.getInteriorPadding()[d] + 1;
      int64_t n = operandType.getDimSize(d), out = type.getDimSize(d);
      // First and last i with 0 <= low + i * step < out.
      int64_t i0 = low >= 0 ? 0 : (-low + step - 1) / step;
      int64_t i1 = std::min(n - 1, out - 1 - low < 0 ? -1 : (out - 1 - low) / step);
      if (i1 < i0) { // nothing of the operand lands in the result
        rewriter.replaceOp(op, result);
        return success();
      }
      first.push_back(i0);
      count.push_back(i1 - i0 + 1);
      at.push_back(low + i0 * step);
      stride.push_back(step);
    }
    SmallVector<OpFoldResult> ones(type.getRank(), rewriter.getIndexAttr(1));
    Value kept = tensor::ExtractSliceOp::create(rewriter, loc, adaptor.getOperand(),
                                                indexAttrs(rewriter, first),
                                                indexAttrs(rewriter, count), ones);
    rewriter.replaceOpWithNewOp<tensor::InsertSliceOp>(op, kept, result, indexAttrs(rewriter, at),
                                                       indexAttrs(rewriter, count),
                                                       indexAttrs(rewriter, stride));
    return success();
  }
};

struct OptBarrierToOperands : OpConversionPattern<hlo::OptBarrierOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(hlo::OptBarrierOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    rewriter.replaceOp(op, adaptor.getInputs());
    return success();
  }
};

} // namespace

void kiln::hlo_to_linalg::populateShapePatterns(const TypeConverter &converter,
                                                RewritePatternSet &patterns) {
  patterns.add<BroadcastInDimToGeneric, ReshapeToTensor, TransposeToLinalg, SliceToTensor,
               DynamicSliceToTensor, ConcatenateToTensor, PadToTensor, OptBarrierToOperands>(
      converter, patterns.getContext());
}
