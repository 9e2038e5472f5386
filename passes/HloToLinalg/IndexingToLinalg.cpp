//===- IndexingToLinalg.cpp - hlo gather and scatter -> linalg and scf -----===//
//
// XLA's general gather and scatter, from their dimension numbers. gather is
// a linalg.generic over the result whose body reads the start indices and
// the operand element (tensor.extract); each start index is clamped into
// the operand as XLA does. scatter is an scf.for over every update element
// that combines it into the operand in place (tensor.extract/insert on the
// loop-carried tensor); an update whose window would leave the operand is
// skipped, as XLA skips it.
//
//===----------------------------------------------------------------------===//

#include "HloToLinalg.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

using namespace mlir;
using namespace kiln;
using namespace kiln::hlo_to_linalg;

namespace {

/// The dimensions of `rank` not in `excluded`, ascending.
SmallVector<int64_t> dimsExcept(int64_t rank, ArrayRef<int64_t> excluded) {
  SmallVector<int64_t> out;
  for (int64_t d = 0; d < rank; ++d)
    if (!llvm::is_contained(excluded, d))
      out.push_back(d);
  return out;
}

/// Element `k` of the index vector at `batch` (the index tensor's other
/// dimensions, in order) of `indices`, whose vector dimension is
/// `vectorDim` (== rank: an implicit trailing dimension of size 1).
Value indexVectorElement(OpBuilder &b, Location loc, Value indices, int64_t vectorDim,
                         ArrayRef<Value> batch, int64_t k) {
  int64_t rank = cast<RankedTensorType>(indices.getType()).getRank();
  SmallVector<Value> coords;
  size_t next = 0;
  for (int64_t d = 0; d < rank; ++d)
    coords.push_back(d == vectorDim ? Value(arith::ConstantIndexOp::create(b, loc, k))
                                    : batch[next++]);
  return tensor::ExtractOp::create(b, loc, indices, coords);
}

struct GatherToGeneric : OpConversionPattern<hlo::GatherOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(hlo::GatherOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    auto type = convertedType(getTypeConverter(), op.getResult());
    auto operandType = cast<RankedTensorType>(op.getOperand().getType());
    ArrayRef<int64_t> offsetDims = op.getOffsetDims(), startIndexMap = op.getStartIndexMap(),
                      sliceSizes = op.getSliceSizes();
    SmallVector<int64_t> batchDims = dimsExcept(type.getRank(), offsetDims);
    SmallVector<int64_t> windowDims =
        dimsExcept(operandType.getRank(), op.getCollapsedSliceDims());
    bool isUnsigned = isUnsignedElement(op.getStartIndices().getType());
    Value operand = adaptor.getOperand(), indices = adaptor.getStartIndices();
    int64_t vectorDim = op.getIndexVectorDim();
    rewriter.replaceOp(op, buildElementwise(rewriter, op.getLoc(), type, {},
                                            [&](OpBuilder &b, Location loc, ValueRange) {
      SmallVector<Value> batch;
      for (int64_t d : batchDims)
        batch.push_back(linalg::IndexOp::create(b, loc, d));
      SmallVector<Value> at(operandType.getRank(), arith::ConstantIndexOp::create(b, loc, 0));
      for (auto [k, d] : llvm::enumerate(startIndexMap))
        at[d] = clampedIndex(b, loc, indexVectorElement(b, loc, indices, vectorDim, batch, k),
                             isUnsigned, operandType.getDimSize(d) - sliceSizes[d]);
      for (auto [j, d] : llvm::enumerate(windowDims))
        at[d] = arith::AddIOp::create(b, loc, at[d],
                                      linalg::IndexOp::create(b, loc, offsetDims[j]));
      return Value(tensor::ExtractOp::create(b, loc, operand, at));
    }));
    return success();
  }
};

struct ScatterToLoop : OpConversionPattern<hlo::ScatterOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(hlo::ScatterOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    auto operandType = cast<RankedTensorType>(op.getOperand().getType());
    auto updatesType = cast<RankedTensorType>(op.getUpdates().getType());
    ArrayRef<int64_t> updateWindowDims = op.getUpdateWindowDims(),
                      toOperand = op.getScatterDimsToOperandDims();
    SmallVector<int64_t> scatterDims = dimsExcept(updatesType.getRank(), updateWindowDims);
    SmallVector<int64_t> windowDims =
        dimsExcept(operandType.getRank(), op.getInsertedWindowDims());
    // The window's extent along each operand dimension.
    SmallVector<int64_t> windowSize(operandType.getRank(), 1);
    for (auto [j, d] : llvm::enumerate(windowDims))
      windowSize[d] = updatesType.getDimSize(updateWindowDims[j]);
    bool indexUnsigned = isUnsignedElement(op.getScatterIndices().getType());
    bool isUnsigned = isUnsignedElement(op.getOperand().getType());
    hlo::Combiner combiner = op.getCombiner();
    Value indices = adaptor.getScatterIndices(), updates = adaptor.getUpdates();
    int64_t vectorDim = op.getIndexVectorDim();

    Location loc = op.getLoc();
    Value zero = arith::ConstantIndexOp::create(rewriter, loc, 0);
    Value one = arith::ConstantIndexOp::create(rewriter, loc, 1);
    Value count = arith::ConstantIndexOp::create(rewriter, loc, updatesType.getNumElements());
    auto loop = scf::ForOp::create(
        rewriter, loc, zero, count, one, ValueRange{adaptor.getOperand()},
        [&](OpBuilder &b, Location l, Value flat, ValueRange carried) {
          // The update element's index, row-major.
          SmallVector<Value> u(updatesType.getRank());
          int64_t stride = 1;
          for (int64_t d = updatesType.getRank() - 1; d >= 0; --d) {
            Value q = arith::DivUIOp::create(b, l, flat,
                                             arith::ConstantIndexOp::create(b, l, stride));
            u[d] = arith::RemUIOp::create(
                b, l, q, arith::ConstantIndexOp::create(b, l, updatesType.getDimSize(d)));
            stride *= updatesType.getDimSize(d);
          }
          SmallVector<Value> batch;
          for (int64_t d : scatterDims)
            batch.push_back(u[d]);
          SmallVector<Value> at(operandType.getRank(), zero);
          Value inside = arith::ConstantIntOp::create(b, l, 1, 1);
          for (auto [k, d] : llvm::enumerate(toOperand)) {
            Value start = indexVectorElement(b, l, indices, vectorDim, batch, k);
            at[d] = indexUnsigned
                        ? Value(arith::IndexCastUIOp::create(b, l, b.getIndexType(), start))
                        : Value(arith::IndexCastOp::create(b, l, b.getIndexType(), start));
            Value last = arith::ConstantIndexOp::create(
                b, l, operandType.getDimSize(d) - windowSize[d]);
            Value fits = arith::AndIOp::create(
                b, l, arith::CmpIOp::create(b, l, arith::CmpIPredicate::sge, at[d], zero),
                arith::CmpIOp::create(b, l, arith::CmpIPredicate::sle, at[d], last));
            inside = arith::AndIOp::create(b, l, inside, fits);
          }
          for (auto [j, d] : llvm::enumerate(windowDims))
            at[d] = arith::AddIOp::create(b, l, at[d], u[updateWindowDims[j]]);
          Value acc = carried[0];
          auto guarded = scf::IfOp::create(
              b, l, inside,
              [&](OpBuilder &tb, Location tl) {
                Value old = tensor::ExtractOp::create(tb, tl, acc, at);
                Value x = tensor::ExtractOp::create(tb, tl, updates, u);
                Value next = combineScalars(tb, tl, combiner, old, x, isUnsigned);
                scf::YieldOp::create(tb, tl,
                                     Value(tensor::InsertOp::create(tb, tl, next, acc, at)));
              },
              [&](OpBuilder &eb, Location el) { scf::YieldOp::create(eb, el, acc); });
          scf::YieldOp::create(b, l, guarded.getResults());
        });
    rewriter.replaceOp(op, loop.getResults());
    return success();
  }
};

} // namespace

void kiln::hlo_to_linalg::populateIndexingPatterns(const TypeConverter &converter,
                                                   RewritePatternSet &patterns) {
  patterns.add<GatherToGeneric, ScatterToLoop>(converter, patterns.getContext());
}
