//===- HloBuilder.cpp - Emitting hlo ops with their result types ----------===//

#include "HloBuilder.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/Sequence.h"

#include <limits>

using namespace mlir;

namespace kiln {

RankedTensorType HloBuilder::typeOf(Value v) { return cast<RankedTensorType>(v.getType()); }

RankedTensorType HloBuilder::tensor(ArrayRef<int64_t> shape, Type element) {
  return RankedTensorType::get(shape, element);
}

Value HloBuilder::scalar(Type element, double value) {
  auto type = tensor({}, element);
  Attribute attr;
  if (isa<FloatType>(element))
    attr = DenseElementsAttr::get(type, b.getFloatAttr(element, value));
  else if (element.isInteger(1))
    attr = DenseElementsAttr::get(type, value != 0);
  else
    attr = DenseElementsAttr::get(type, b.getIntegerAttr(element, int64_t(value)));
  return make<hlo::ConstantOp>(type, cast<ElementsAttr>(attr));
}

Value HloBuilder::splat(RankedTensorType type, double value) {
  Value s = scalar(type.getElementType(), value);
  return type.getRank() == 0 ? s : broadcast(s, type.getShape(), {});
}

Value HloBuilder::constantI32(ArrayRef<int32_t> values) {
  auto type = tensor({int64_t(values.size())}, i32());
  return make<hlo::ConstantOp>(type, cast<ElementsAttr>(DenseElementsAttr::get(type, values)));
}

Value HloBuilder::constantF32(ArrayRef<float> values) {
  auto type = tensor({int64_t(values.size())}, f32());
  return make<hlo::ConstantOp>(type, cast<ElementsAttr>(DenseElementsAttr::get(type, values)));
}

Value HloBuilder::iota(ArrayRef<int64_t> shape, int64_t dim, Type element) {
  return make<hlo::IotaOp>(tensor(shape, element), dim);
}

Value HloBuilder::add(Value a, Value c) { return make<hlo::AddOp>(a, c); }
Value HloBuilder::sub(Value a, Value c) { return make<hlo::SubtractOp>(a, c); }
Value HloBuilder::mul(Value a, Value c) { return make<hlo::MultiplyOp>(a, c); }
Value HloBuilder::div(Value a, Value c) { return make<hlo::DivideOp>(a, c); }
Value HloBuilder::max(Value a, Value c) { return make<hlo::MaximumOp>(a, c); }
Value HloBuilder::min(Value a, Value c) { return make<hlo::MinimumOp>(a, c); }
Value HloBuilder::pow(Value a, Value c) { return make<hlo::PowerOp>(a, c); }
Value HloBuilder::logicalAnd(Value a, Value c) { return make<hlo::AndOp>(a, c); }
Value HloBuilder::neg(Value a) { return make<hlo::NegateOp>(a); }
Value HloBuilder::exp(Value a) { return make<hlo::ExpOp>(a); }
Value HloBuilder::log(Value a) { return make<hlo::LogOp>(a); }
Value HloBuilder::rsqrt(Value a) { return make<hlo::RsqrtOp>(a); }
Value HloBuilder::sqrt(Value a) { return make<hlo::SqrtOp>(a); }
Value HloBuilder::cos(Value a) { return make<hlo::CosineOp>(a); }
Value HloBuilder::sin(Value a) { return make<hlo::SineOp>(a); }
Value HloBuilder::sign(Value a) { return make<hlo::SignOp>(a); }

Value HloBuilder::convert(Value a, Type element) {
  if (typeOf(a).getElementType() == element)
    return a;
  return make<hlo::ConvertOp>(tensor(shapeOf(a), element), a);
}

Value HloBuilder::roundTo(Value a, Type narrow) {
  return narrow ? convert(convert(a, narrow), typeOf(a).getElementType()) : a;
}

Value HloBuilder::compare(Value a, Value c, hlo::ComparisonDirection dir) {
  return make<hlo::CompareOp>(tensor(shapeOf(a), b.getI1Type()), a, c, dir);
}

Value HloBuilder::select(Value pred, Value onTrue, Value onFalse) {
  return make<hlo::SelectOp>(onTrue.getType(), pred, onTrue, onFalse);
}

Value HloBuilder::broadcast(Value a, ArrayRef<int64_t> shape, ArrayRef<int64_t> dims) {
  return make<hlo::BroadcastInDimOp>(tensor(shape, typeOf(a).getElementType()), a, dims);
}

Value HloBuilder::broadcastLeading(Value a, ArrayRef<int64_t> shape) {
  SmallVector<int64_t> dims;
  for (int64_t i = 0; i < typeOf(a).getRank(); ++i)
    dims.push_back(i);
  return broadcast(a, shape, dims);
}

Value HloBuilder::broadcastLast(Value a, ArrayRef<int64_t> shape) {
  return broadcast(a, shape, {int64_t(shape.size()) - 1});
}

Value HloBuilder::reshape(Value a, ArrayRef<int64_t> shape) {
  if (shapeOf(a) == shape)
    return a;
  return make<hlo::ReshapeOp>(tensor(shape, typeOf(a).getElementType()), a);
}

Value HloBuilder::transpose(Value a, ArrayRef<int64_t> perm) {
  if (llvm::equal(perm, llvm::seq<int64_t>(0, int64_t(perm.size()))))
    return a;
  SmallVector<int64_t> shape;
  for (int64_t p : perm)
    shape.push_back(shapeOf(a)[p]);
  return make<hlo::TransposeOp>(tensor(shape, typeOf(a).getElementType()), a, perm);
}

Value HloBuilder::concat(ValueRange values, int64_t dim) {
  SmallVector<int64_t> shape(shapeOf(values.front()));
  shape[dim] = 0;
  for (Value v : values)
    shape[dim] += shapeOf(v)[dim];
  return make<hlo::ConcatenateOp>(tensor(shape, typeOf(values.front()).getElementType()),
                                  values, dim);
}

Value HloBuilder::slice(Value a, int64_t dim, int64_t start, int64_t limit) {
  ArrayRef<int64_t> in = shapeOf(a);
  SmallVector<int64_t> starts(in.size(), 0), limits(in), strides(in.size(), 1), shape(in);
  starts[dim] = start;
  limits[dim] = limit;
  shape[dim] = limit - start;
  return make<hlo::SliceOp>(tensor(shape, typeOf(a).getElementType()), a, starts, limits,
                            strides);
}

Value HloBuilder::dynamicSlice(Value a, int64_t dim, Value start, int64_t size) {
  SmallVector<int64_t> shape(shapeOf(a));
  shape[dim] = size;
  SmallVector<Value> starts;
  Value zero;
  for (int64_t d = 0; d < int64_t(shape.size()); ++d) {
    if (d == dim) {
      starts.push_back(start);
      continue;
    }
    if (!zero)
      zero = scalar(typeOf(start).getElementType(), 0);
    starts.push_back(zero);
  }
  return make<hlo::DynamicSliceOp>(tensor(shape, typeOf(a).getElementType()), a, starts, shape);
}

Value HloBuilder::padEnd(Value a, int64_t dim, int64_t size) {
  return padZeros(a, dim, 0, size - shapeOf(a)[dim]);
}

Value HloBuilder::padZeros(Value a, int64_t dim, int64_t before, int64_t after) {
  ArrayRef<int64_t> in = shapeOf(a);
  SmallVector<int64_t> lo(in.size(), 0), hi(in.size(), 0), interior(in.size(), 0),
      shape(in);
  lo[dim] = before;
  hi[dim] = after;
  shape[dim] += before + after;
  Type element = typeOf(a).getElementType();
  return make<hlo::PadOp>(tensor(shape, element), a, scalar(element, 0), lo, hi, interior);
}

Value HloBuilder::dot(Value lhs, Value rhs, ArrayRef<int64_t> lhsBatch,
                      ArrayRef<int64_t> rhsBatch, ArrayRef<int64_t> lhsContract,
                      ArrayRef<int64_t> rhsContract) {
  ArrayRef<int64_t> l = shapeOf(lhs), r = shapeOf(rhs);
  SmallVector<int64_t> shape;
  for (int64_t d : lhsBatch)
    shape.push_back(l[d]);
  for (int64_t d = 0; d < int64_t(l.size()); ++d)
    if (!llvm::is_contained(lhsBatch, d) && !llvm::is_contained(lhsContract, d))
      shape.push_back(l[d]);
  for (int64_t d = 0; d < int64_t(r.size()); ++d)
    if (!llvm::is_contained(rhsBatch, d) && !llvm::is_contained(rhsContract, d))
      shape.push_back(r[d]);
  return make<hlo::DotGeneralOp>(tensor(shape, typeOf(lhs).getElementType()), lhs, rhs,
                                 lhsBatch, rhsBatch, lhsContract, rhsContract);
}

Value HloBuilder::reduce(Value a, ArrayRef<int64_t> dims, hlo::Combiner combiner) {
  Type element = typeOf(a).getElementType();
  SmallVector<int64_t> shape;
  for (int64_t d = 0; d < typeOf(a).getRank(); ++d)
    if (!llvm::is_contained(dims, d))
      shape.push_back(shapeOf(a)[d]);
  // The combiner's identity. Integers have no infinity: the extreme value of
  // their width (a pred is unsigned).
  bool extreme = combiner == hlo::Combiner::max || combiner == hlo::Combiner::min;
  Value init;
  if (auto integer = dyn_cast<IntegerType>(element); integer && extreme) {
    unsigned width = integer.getWidth();
    bool isUnsigned = integer.isUnsigned() || width == 1;
    APInt v = combiner == hlo::Combiner::max
                  ? (isUnsigned ? APInt::getMinValue(width) : APInt::getSignedMinValue(width))
                  : (isUnsigned ? APInt::getMaxValue(width) : APInt::getSignedMaxValue(width));
    auto type = tensor({}, element);
    init = make<hlo::ConstantOp>(
        type, cast<ElementsAttr>(DenseElementsAttr::get(type, ArrayRef<APInt>{v})));
  } else {
    double identity = combiner == hlo::Combiner::mul ? 1 : 0;
    if (extreme)
      identity = combiner == hlo::Combiner::max ? -std::numeric_limits<double>::infinity()
                                                : std::numeric_limits<double>::infinity();
    init = scalar(element, identity);
  }
  return make<hlo::ReduceOp>(tensor(shape, element), a, init, dims, combiner);
}

Value HloBuilder::sumLast(Value a) { return sum(a, {typeOf(a).getRank() - 1}); }
Value HloBuilder::maxLast(Value a) {
  return reduce(a, {typeOf(a).getRank() - 1}, hlo::Combiner::max);
}
Value HloBuilder::sumAll(Value a) {
  SmallVector<int64_t> dims;
  for (int64_t d = 0; d < typeOf(a).getRank(); ++d)
    dims.push_back(d);
  return dims.empty() ? a : sum(a, dims);
}

Value HloBuilder::gatherRows(Value table, Value ids) {
  ArrayRef<int64_t> idShape = shapeOf(ids);
  int64_t rank = int64_t(idShape.size()), dim = shapeOf(table)[1];
  SmallVector<int64_t> shape(idShape);
  shape.push_back(dim);
  return make<hlo::GatherOp>(tensor(shape, typeOf(table).getElementType()), table, ids,
                             /*offset_dims=*/ArrayRef<int64_t>{rank},
                             /*collapsed_slice_dims=*/ArrayRef<int64_t>{0},
                             /*start_index_map=*/ArrayRef<int64_t>{0},
                             /*index_vector_dim=*/rank,
                             /*slice_sizes=*/ArrayRef<int64_t>{1, dim});
}

Value HloBuilder::scatterAddRows(Value zeros, Value ids, Value updates) {
  int64_t rank = typeOf(ids).getRank();
  return make<hlo::ScatterOp>(zeros.getType(), zeros, ids, updates,
                              /*update_window_dims=*/ArrayRef<int64_t>{rank},
                              /*inserted_window_dims=*/ArrayRef<int64_t>{0},
                              /*scatter_dims_to_operand_dims=*/ArrayRef<int64_t>{0},
                              /*index_vector_dim=*/rank, hlo::Combiner::add);
}

Value HloBuilder::oneHot(Value ids, int64_t n, Value offset) {
  SmallVector<int64_t> shape(shapeOf(ids));
  shape.push_back(n);
  Value columns = iota(shape, int64_t(shape.size()) - 1, i32());
  if (offset)
    columns = add(columns, broadcast(offset, shape, {}));
  return compare(broadcastLeading(ids, shape), columns, hlo::ComparisonDirection::EQ);
}

} // namespace kiln
