//===- HloShapes.cpp - The result shape of each hlo op, once --------------===//

#include "kiln/Dialect/Hlo/IR/HloShapes.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallSet.h"

#include <algorithm>

using namespace mlir;

namespace kiln::hlo {

LogicalResult checkDistinctDims(EmitShapeError emit, StringRef what, ArrayRef<int64_t> dims,
                                int64_t rank) {
  llvm::SmallSet<int64_t, 8> seen;
  for (int64_t d : dims) {
    if (d < 0 || d >= rank)
      return emit() << what << " " << d << " is outside a tensor of rank " << rank;
    if (!seen.insert(d).second)
      return emit() << what << " lists dimension " << d << " twice";
  }
  return success();
}

FailureOr<Shape> transposeShape(RankedTensorType in, ArrayRef<int64_t> perm, EmitShapeError emit) {
  if (int64_t(perm.size()) != in.getRank()) {
    emit() << "permutation of " << perm.size() << " for a rank-" << in.getRank() << " operand";
    return failure();
  }
  if (failed(checkDistinctDims(emit, "permutation entry", perm, in.getRank())))
    return failure();
  Shape shape;
  for (int64_t p : perm)
    shape.push_back(in.getDimSize(p));
  return shape;
}

FailureOr<Shape> concatenateShape(TypeRange inputs, int64_t dim, EmitShapeError emit) {
  if (inputs.empty()) {
    emit() << "needs at least one operand";
    return failure();
  }
  auto first = cast<RankedTensorType>(inputs.front());
  if (dim < 0 || dim >= first.getRank()) {
    emit() << "dimension " << dim << " is outside operands of rank " << first.getRank();
    return failure();
  }
  Shape shape(first.getShape());
  shape[dim] = 0;
  for (Type input : inputs) {
    auto t = cast<RankedTensorType>(input);
    if (t.getRank() != first.getRank() || t.getElementType() != first.getElementType()) {
      emit() << "operands must share rank and element type";
      return failure();
    }
    for (int64_t i = 0; i < t.getRank(); ++i)
      if (i != dim && t.getDimSize(i) != first.getDimSize(i)) {
        emit() << "operands differ on dimension " << i;
        return failure();
      }
    shape[dim] += t.getDimSize(dim);
  }
  return shape;
}

FailureOr<Shape> sliceShape(RankedTensorType in, ArrayRef<int64_t> start, ArrayRef<int64_t> limit,
                            ArrayRef<int64_t> strides, EmitShapeError emit) {
  if (int64_t(start.size()) != in.getRank() || limit.size() != start.size() ||
      strides.size() != start.size()) {
    emit() << "start, limit and strides need " << in.getRank() << " entries each";
    return failure();
  }
  Shape shape;
  for (int64_t i = 0; i < in.getRank(); ++i) {
    if (start[i] < 0 || limit[i] > in.getDimSize(i) || start[i] > limit[i] || strides[i] < 1) {
      emit() << "slice [" << start[i] << ":" << limit[i] << ":" << strides[i]
             << "] of dimension " << i << " of size " << in.getDimSize(i);
      return failure();
    }
    shape.push_back((limit[i] - start[i] + strides[i] - 1) / strides[i]);
  }
  return shape;
}

FailureOr<Shape> dynamicSliceShape(RankedTensorType in, size_t startIndices,
                                   ArrayRef<int64_t> sizes, EmitShapeError emit) {
  if (int64_t(startIndices) != in.getRank()) {
    emit() << "needs " << in.getRank() << " start indices, got " << startIndices;
    return failure();
  }
  if (int64_t(sizes.size()) != in.getRank()) {
    emit() << "slice_sizes needs " << in.getRank() << " entries";
    return failure();
  }
  for (int64_t i = 0; i < in.getRank(); ++i)
    if (sizes[i] < 0 || sizes[i] > in.getDimSize(i)) {
      emit() << "slice size " << sizes[i] << " of dimension " << i << " of size "
             << in.getDimSize(i);
      return failure();
    }
  return Shape(sizes);
}

FailureOr<Shape> padShape(RankedTensorType in, RankedTensorType padding, ArrayRef<int64_t> lo,
                          ArrayRef<int64_t> hi, ArrayRef<int64_t> interior, EmitShapeError emit) {
  if (padding.getRank() != 0 || padding.getElementType() != in.getElementType()) {
    emit() << "padding_value must be a scalar of the operand's element type";
    return failure();
  }
  if (int64_t(lo.size()) != in.getRank() || hi.size() != lo.size() ||
      interior.size() != lo.size()) {
    emit() << "padding needs " << in.getRank() << " entries per list";
    return failure();
  }
  Shape shape;
  for (int64_t i = 0; i < in.getRank(); ++i) {
    if (interior[i] < 0) {
      emit() << "interior padding must be non-negative";
      return failure();
    }
    int64_t n = in.getDimSize(i);
    shape.push_back(lo[i] + hi[i] + n + std::max<int64_t>(n - 1, 0) * interior[i]);
  }
  return shape;
}

FailureOr<Shape> dotGeneralShape(RankedTensorType lhs, RankedTensorType rhs, ArrayRef<int64_t> lb,
                                 ArrayRef<int64_t> rb, ArrayRef<int64_t> lc, ArrayRef<int64_t> rc,
                                 EmitShapeError emit) {
  if (lb.size() != rb.size() || lc.size() != rc.size()) {
    emit() << "lhs and rhs need as many batching and as many contracting dimensions";
    return failure();
  }
  SmallVector<int64_t> lhsDims(lb), rhsDims(rb);
  lhsDims.append(lc.begin(), lc.end());
  rhsDims.append(rc.begin(), rc.end());
  if (failed(checkDistinctDims(emit, "lhs dimension", lhsDims, lhs.getRank())) ||
      failed(checkDistinctDims(emit, "rhs dimension", rhsDims, rhs.getRank())))
    return failure();
  for (size_t i = 0; i < lhsDims.size(); ++i)
    if (lhs.getDimSize(lhsDims[i]) != rhs.getDimSize(rhsDims[i])) {
      emit() << "lhs dimension " << lhsDims[i] << " (" << lhs.getDimSize(lhsDims[i])
             << ") does not match rhs dimension " << rhsDims[i] << " ("
             << rhs.getDimSize(rhsDims[i]) << ")";
      return failure();
    }
  Shape shape;
  for (int64_t d : lb)
    shape.push_back(lhs.getDimSize(d));
  for (int64_t d = 0; d < lhs.getRank(); ++d)
    if (!llvm::is_contained(lhsDims, d))
      shape.push_back(lhs.getDimSize(d));
  for (int64_t d = 0; d < rhs.getRank(); ++d)
    if (!llvm::is_contained(rhsDims, d))
      shape.push_back(rhs.getDimSize(d));
  return shape;
}

FailureOr<Shape> reduceShape(RankedTensorType in, RankedTensorType init,
                             ArrayRef<int64_t> dimensions, EmitShapeError emit) {
  if (init.getRank() != 0 || init.getElementType() != in.getElementType()) {
    emit() << "init must be a scalar of the operand's element type";
    return failure();
  }
  if (failed(checkDistinctDims(emit, "reduced dimension", dimensions, in.getRank())))
    return failure();
  Shape shape;
  for (int64_t d = 0; d < in.getRank(); ++d)
    if (!llvm::is_contained(dimensions, d))
      shape.push_back(in.getDimSize(d));
  return shape;
}

FailureOr<Shape> gatherShape(RankedTensorType in, RankedTensorType idx, ArrayRef<int64_t> offsetDims,
                             ArrayRef<int64_t> collapsed, ArrayRef<int64_t> startIndexMap,
                             int64_t ivd, ArrayRef<int64_t> sizes, EmitShapeError emit) {
  if (int64_t(sizes.size()) != in.getRank()) {
    emit() << "slice_sizes needs " << in.getRank() << " entries";
    return failure();
  }
  if (failed(checkDistinctDims(emit, "collapsed slice dimension", collapsed, in.getRank())) ||
      failed(checkDistinctDims(emit, "start_index_map entry", startIndexMap, in.getRank())))
    return failure();
  for (int64_t d : collapsed)
    if (sizes[d] != 1) {
      emit() << "collapsed dimension " << d << " must have slice size 1";
      return failure();
    }
  if (ivd < 0 || ivd > idx.getRank()) {
    emit() << "index_vector_dim " << ivd << " is outside [0, " << idx.getRank() << "]";
    return failure();
  }
  int64_t vecLen = ivd == idx.getRank() ? 1 : idx.getDimSize(ivd);
  if (vecLen != int64_t(startIndexMap.size())) {
    emit() << "index vectors of " << vecLen << " for a start_index_map of "
           << startIndexMap.size();
    return failure();
  }
  // Batch dims of the indices, in order, fill the result dims not in offset_dims.
  SmallVector<int64_t> batch;
  for (int64_t d = 0; d < idx.getRank(); ++d)
    if (d != ivd)
      batch.push_back(idx.getDimSize(d));
  SmallVector<int64_t> window;
  for (int64_t d = 0; d < in.getRank(); ++d)
    if (!llvm::is_contained(collapsed, d))
      window.push_back(sizes[d]);
  int64_t rank = int64_t(batch.size() + window.size());
  if (int64_t(offsetDims.size()) != int64_t(window.size()) ||
      failed(checkDistinctDims(emit, "offset dimension", offsetDims, rank))) {
    emit() << "offset_dims needs " << window.size() << " distinct dimensions of the result";
    return failure();
  }
  Shape shape;
  for (int64_t d = 0, b = 0, w = 0; d < rank; ++d)
    shape.push_back(llvm::is_contained(offsetDims, d) ? window[w++] : batch[b++]);
  return shape;
}

} // namespace kiln::hlo
