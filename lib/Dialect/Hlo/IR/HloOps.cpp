//===- HloOps.cpp - Verifiers of the hlo dialect --------------------------===//
//
// What XLA's shape inference checks, so a module that verifies here is one
// XLA accepts: ranks, dimension lists, sizes and element types.
//
//===----------------------------------------------------------------------===//

#include "kiln/Dialect/Hlo/IR/HloOps.h"
#include "kiln/Dialect/Hlo/IR/HloShapes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/MathExtras.h"

#include <algorithm>
#include <vector>

using namespace mlir;

namespace kiln::hlo {
namespace {

RankedTensorType typeOf(Value v) { return cast<RankedTensorType>(v.getType()); }

/// The op's own errors, for a shape rule (HloShapes.h).
auto errorsOf(Operation *op) {
  return [op] { return op->emitOpError(); };
}

/// `dims` are distinct dimensions of a rank-`rank` tensor.
LogicalResult checkDims(Operation *op, StringRef what, ArrayRef<int64_t> dims, int64_t rank) {
  return checkDistinctDims(errorsOf(op), what, dims, rank);
}

/// `dim` is a dimension of `type`, or an error naming the attribute.
LogicalResult checkDim(Operation *op, StringRef attr, int64_t dim, RankedTensorType type) {
  if (dim < 0 || dim >= type.getRank())
    return op->emitOpError() << attr << " " << dim << " is outside a rank-" << type.getRank()
                             << " operand";
  return success();
}

LogicalResult checkShape(Operation *op, ArrayRef<int64_t> expected, RankedTensorType actual) {
  if (actual.getShape() != expected) {
    auto diag = op->emitOpError() << "result shape [";
    llvm::interleaveComma(actual.getShape(), diag);
    diag << "] should be [";
    llvm::interleaveComma(expected, diag);
    return diag << "]";
  }
  return success();
}

LogicalResult sameElementType(Operation *op, Type a, Type b, StringRef what) {
  if (getElementTypeOrSelf(a) != getElementTypeOrSelf(b))
    return op->emitOpError() << what << " element types differ: " << getElementTypeOrSelf(a)
                             << " vs " << getElementTypeOrSelf(b);
  return success();
}

} // namespace

LogicalResult ConstantOp::verify() {
  if (getValue().getType() != getType())
    return emitOpError() << "value of type " << getValue().getType() << " for a result of type "
                         << getType();
  return success();
}

LogicalResult IotaOp::verify() {
  return checkDim(*this, "iota_dimension", int64_t(getIotaDimension()), getType());
}

LogicalResult ConvertOp::verify() {
  if (getOperand().getType().getShape() != getType().getShape())
    return emitOpError("converts element types only: operand and result shapes differ");
  return success();
}

LogicalResult CompareOp::verify() {
  if (getLhs().getType() != getRhs().getType())
    return emitOpError() << "operands of types " << getLhs().getType() << " and "
                         << getRhs().getType() << " differ";
  return checkShape(*this, getLhs().getType().getShape(), getType());
}

LogicalResult SelectOp::verify() {
  if (getOnTrue().getType() != getOnFalse().getType() || getOnTrue().getType() != getType())
    return emitOpError("on_true, on_false and the result must have one type");
  if (getPred().getType().getShape() != getType().getShape())
    return emitOpError("pred must have the result's shape");
  return success();
}

LogicalResult BroadcastInDimOp::verify() {
  auto in = getOperand().getType();
  auto out = getType();
  ArrayRef<int64_t> dims = getBroadcastDimensions();
  if (int64_t(dims.size()) != in.getRank())
    return emitOpError() << "broadcast_dimensions has " << dims.size()
                         << " entries for an operand of rank " << in.getRank();
  if (failed(checkDims(*this, "broadcast dimension", dims, out.getRank())))
    return failure();
  for (auto [i, d] : llvm::enumerate(dims))
    if (in.getDimSize(i) != 1 && in.getDimSize(i) != out.getDimSize(d))
      return emitOpError() << "operand dimension " << i << " (" << in.getDimSize(i)
                           << ") does not broadcast to result dimension " << d << " ("
                           << out.getDimSize(d) << ")";
  return sameElementType(*this, in, out, "operand and result");
}

LogicalResult ReshapeOp::verify() {
  if (getOperand().getType().getNumElements() != getType().getNumElements())
    return emitOpError() << "reshape of " << getOperand().getType().getNumElements()
                         << " elements to " << getType().getNumElements();
  return sameElementType(*this, getOperand().getType(), getType(), "operand and result");
}

LogicalResult TransposeOp::verify() {
  FailureOr<Shape> shape = transposeShape(getOperand().getType(), getPermutation(), errorsOf(*this));
  return failed(shape) ? failure() : checkShape(*this, *shape, getType());
}

LogicalResult ConcatenateOp::verify() {
  FailureOr<Shape> shape =
      concatenateShape(getInputs().getTypes(), getDimension(), errorsOf(*this));
  return failed(shape) ? failure() : checkShape(*this, *shape, getType());
}

LogicalResult SliceOp::verify() {
  FailureOr<Shape> shape = sliceShape(getOperand().getType(), getStartIndices(),
                                      getLimitIndices(), getStrides(), errorsOf(*this));
  return failed(shape) ? failure() : checkShape(*this, *shape, getType());
}

LogicalResult DynamicSliceOp::verify() {
  FailureOr<Shape> shape = dynamicSliceShape(getOperand().getType(), getStartIndices().size(),
                                             getSliceSizes(), errorsOf(*this));
  return failed(shape) ? failure() : checkShape(*this, *shape, getType());
}

LogicalResult PadOp::verify() {
  FailureOr<Shape> shape =
      padShape(getOperand().getType(), getPaddingValue().getType(), getEdgePaddingLow(),
               getEdgePaddingHigh(), getInteriorPadding(), errorsOf(*this));
  return failed(shape) ? failure() : checkShape(*this, *shape, getType());
}

LogicalResult DotGeneralOp::verify() {
  auto lhs = getLhs().getType(), rhs = getRhs().getType();
  FailureOr<Shape> shape = dotGeneralShape(
      lhs, rhs, getLhsBatchingDimensions(), getRhsBatchingDimensions(),
      getLhsContractingDimensions(), getRhsContractingDimensions(), errorsOf(*this));
  if (failed(shape) || failed(sameElementType(*this, lhs, rhs, "lhs and rhs")))
    return failure();
  return checkShape(*this, *shape, getType());
}

LogicalResult ReduceOp::verify() {
  auto in = getOperand().getType();
  FailureOr<Shape> shape =
      reduceShape(in, getInit().getType(), getDimensions(), errorsOf(*this));
  if (failed(shape) || failed(sameElementType(*this, in, getType(), "operand and result")))
    return failure();
  return checkShape(*this, *shape, getType());
}

LogicalResult GatherOp::verify() {
  FailureOr<Shape> shape = gatherShape(
      getOperand().getType(), getStartIndices().getType(), getOffsetDims(),
      getCollapsedSliceDims(), getStartIndexMap(), getIndexVectorDim(), getSliceSizes(),
      errorsOf(*this));
  return failed(shape) ? failure() : checkShape(*this, *shape, getType());
}

LogicalResult ScatterOp::verify() {
  auto in = getOperand().getType();
  if (getType() != in)
    return emitOpError("the result must have the operand's type");
  if (failed(sameElementType(*this, in, getUpdates().getType(), "operand and updates")))
    return failure();
  if (failed(checkDims(*this, "inserted window dimension", getInsertedWindowDims(),
                       in.getRank())) ||
      failed(checkDims(*this, "scatter_dims_to_operand_dims entry",
                       getScatterDimsToOperandDims(), in.getRank())))
    return failure();
  auto upd = getUpdates().getType();
  if (int64_t(getUpdateWindowDims().size() + getInsertedWindowDims().size()) != in.getRank())
    return emitOpError("update_window_dims and inserted_window_dims must cover the operand");
  return checkDims(*this, "update window dimension", getUpdateWindowDims(), upd.getRank());
}

namespace {
/// Replica groups `[groups, size]` of distinct non-negative ids, a positive
/// channel id if any, use_global_device_ids only with one; the group size.
FailureOr<int64_t> verifyCollective(Operation *op, DenseIntElementsAttr groups,
                                    std::optional<uint64_t> channel, bool global) {
  auto type = cast<ShapedType>(groups.getType());
  if (type.getRank() != 2 || type.getDimSize(1) < 1)
    return op->emitOpError("replica_groups must be a [groups, group size] tensor");
  if (channel && int64_t(*channel) <= 0)
    return op->emitOpError("channel_id must be positive");
  if (global && !channel)
    return op->emitOpError("use_global_device_ids needs a channel_id (XLA's flattened ids)");
  // Sorted, not a set: FSDP over a large world lists every rank, and the
  // verifier runs after every pass.
  std::vector<int64_t> ids;
  ids.reserve(size_t(type.getNumElements()));
  for (APInt id : groups.getValues<APInt>())
    ids.push_back(id.getSExtValue());
  llvm::sort(ids);
  if (!ids.empty() && ids.front() < 0)
    return op->emitOpError() << "replica id " << ids.front() << " is negative or listed twice";
  auto twice = std::adjacent_find(ids.begin(), ids.end());
  if (twice != ids.end())
    return op->emitOpError() << "replica id " << *twice << " is negative or listed twice";
  return type.getDimSize(1);
}

/// verifyCollective, and `dim` (attribute `attr`) a dimension of the
/// operand; with `splits`, one that splits into a block per member.
template <typename OpT>
FailureOr<int64_t> verifyCollectiveOnDim(OpT op, StringRef attr, int64_t dim, bool splits) {
  FailureOr<int64_t> n = verifyCollective(op, cast<DenseIntElementsAttr>(op.getReplicaGroups()),
                                          op.getChannelId(), op.getUseGlobalDeviceIds());
  auto in = op.getOperand().getType();
  if (failed(n) || failed(checkDim(op, attr, dim, in)))
    return failure();
  if (splits && in.getDimSize(dim) % *n)
    return op.emitOpError() << "dimension " << dim << " (" << in.getDimSize(dim)
                            << ") does not split into " << *n << " blocks";
  return n;
}
} // namespace

LogicalResult AllGatherOp::verify() {
  int64_t dim = getAllGatherDim();
  FailureOr<int64_t> n = verifyCollectiveOnDim(*this, "all_gather_dim", dim, false);
  if (failed(n))
    return failure();
  auto in = getOperand().getType();
  SmallVector<int64_t> shape(in.getShape());
  if (llvm::MulOverflow(shape[dim], *n, shape[dim]))
    return emitOpError() << "dimension " << dim << " (" << in.getDimSize(dim)
                         << ") gathered from " << *n << " ranks overflows int64";
  return checkShape(*this, shape, getType());
}

LogicalResult ReduceScatterOp::verify() {
  int64_t dim = getScatterDimension();
  FailureOr<int64_t> n = verifyCollectiveOnDim(*this, "scatter_dimension", dim, true);
  if (failed(n))
    return failure();
  auto in = getOperand().getType();
  SmallVector<int64_t> shape(in.getShape());
  shape[dim] /= *n;
  return checkShape(*this, shape, getType());
}

LogicalResult AllReduceOp::verify() {
  if (failed(verifyCollective(*this, cast<DenseIntElementsAttr>(getReplicaGroups()),
                              getChannelId(), getUseGlobalDeviceIds())))
    return failure();
  if (getOperand().getType() != getType())
    return emitOpError("the result must have the operand's type");
  return success();
}

LogicalResult AllToAllOp::verify() {
  int64_t dim = getSplitDimension();
  FailureOr<int64_t> n = verifyCollectiveOnDim(*this, "split_dimension", dim, true);
  if (failed(n))
    return failure();
  if (getUseGlobalDeviceIds())
    return emitOpError("all-to-all takes no use_global_device_ids (XLA's groups are partition ids)");
  return checkShape(*this, getOperand().getType().getShape(), getType());
}

LogicalResult CustomCallOp::verify() {
  if (getCallTargetName().empty())
    return emitOpError("needs a call_target_name");
  if (auto aliases = getOutputOperandAliases()) {
    if (aliases->size() != getNumResults())
      return emitOpError() << "output_operand_aliases needs one entry per result ("
                           << getNumResults() << ")";
    for (auto [i, a] : llvm::enumerate(*aliases)) {
      if (a < 0)
        continue;
      if (a >= int64_t(getInputs().size()))
        return emitOpError() << "result " << i << " aliases operand " << a
                             << ", which does not exist";
      if (getInputs()[a].getType() != getResult(i).getType())
        return emitOpError() << "result " << i << " aliases operand " << a
                             << " of another type";
    }
  }
  return success();
}

LogicalResult OptBarrierOp::verify() {
  if (getInputs().empty())
    return emitOpError("needs at least one operand");
  if (getNumResults() != getInputs().size())
    return emitOpError() << "has " << getInputs().size() << " operands but " << getNumResults()
                         << " results: it returns its operands";
  for (auto [i, pair] : llvm::enumerate(llvm::zip(getInputs().getTypes(), getResultTypes())))
    if (std::get<0>(pair) != std::get<1>(pair))
      return emitOpError() << "result " << i << " has type " << std::get<1>(pair)
                           << ", operand " << i << " " << std::get<0>(pair)
                           << ": it returns its operands";
  return success();
}

} // namespace kiln::hlo

#include "kiln/Dialect/Hlo/IR/HloOpInterfaces.cpp.inc"

#define GET_OP_CLASSES
#include "kiln/Dialect/Hlo/IR/HloOps.cpp.inc"
