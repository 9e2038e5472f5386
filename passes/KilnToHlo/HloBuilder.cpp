//===- HloBuilder.cpp - Emitting hlo ops with their result types ----------===//

#include "HloBuilder.h"

#include "kiln/Dialect/Hlo/IR/HloShapes.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/Sequence.h"
#include "llvm/Support/ErrorHandling.h"

#include <limits>

using namespace mlir;

namespace kiln {

RankedTensorType HloBuilder::typeOf(Value v) { return cast<RankedTensorType>(v.getType()); }

hlo::EmitShapeError HloBuilder::errors() { return errorAtLocation; }

hlo::Shape HloBuilder::inferred(FailureOr<hlo::Shape> shape) {
  // A lowering builds each op from operands it shaped itself.
  if (failed(shape))
    llvm::report_fatal_error("HloBuilder: an hlo op's shape rule refused the operands a "
                             "lowering built it from (the error above)");
  return std::move(*shape);
}

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
  hlo::Shape shape = inferred(hlo::transposeShape(typeOf(a), perm, errors()));
  return make<hlo::TransposeOp>(tensor(shape, typeOf(a).getElementType()), a, perm);
}

Value HloBuilder::concat(ValueRange values, int64_t dim) {
  hlo::Shape shape = inferred(hlo::concatenateShape(values.getTypes(), dim, errors()));
  return make<hlo::ConcatenateOp>(tensor(shape, typeOf(values.front()).getElementType()),
                                  values, dim);
}

Value HloBuilder::slice(Value a, int64_t dim, int64_t start, int64_t limit) {
  ArrayRef<int64_t> in = shapeOf(a);
  SmallVector<int64_t> starts(in.size(), 0), limits(in), strides(in.size(), 1);
  starts[dim] = start;
  limits[dim] = limit;
  hlo::Shape shape = inferred(hlo::sliceShape(typeOf(a), starts, limits, strides, errors()));
  return make<hlo::SliceOp>(tensor(shape, typeOf(a).getElementType()), a, starts, limits,
                            strides);
}

Value HloBuilder::dynamicSlice(Value a, int64_t dim, Value start, int64_t size) {
  SmallVector<int64_t> sizes(shapeOf(a));
  sizes[dim] = size;
  hlo::Shape shape = inferred(hlo::dynamicSliceShape(typeOf(a), sizes.size(), sizes, errors()));
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
  SmallVector<int64_t> lo(in.size(), 0), hi(in.size(), 0), interior(in.size(), 0);
  lo[dim] = before;
  hi[dim] = after;
  Type element = typeOf(a).getElementType();
  Value zero = scalar(element, 0);
  hlo::Shape shape = inferred(hlo::padShape(typeOf(a), typeOf(zero), lo, hi, interior, errors()));
  return make<hlo::PadOp>(tensor(shape, element), a, zero, lo, hi, interior);
}

Value HloBuilder::dot(Value lhs, Value rhs, ArrayRef<int64_t> lhsBatch,
                      ArrayRef<int64_t> rhsBatch, ArrayRef<int64_t> lhsContract,
                      ArrayRef<int64_t> rhsContract) {
  hlo::Shape shape = inferred(hlo::dotGeneralShape(typeOf(lhs), typeOf(rhs), lhsBatch, rhsBatch,
                                                    lhsContract, rhsContract, errors()));
  return make<hlo::DotGeneralOp>(tensor(shape, typeOf(lhs).getElementType()), lhs, rhs,
                                 lhsBatch, rhsBatch, lhsContract, rhsContract);
}

Value HloBuilder::reduce(Value a, ArrayRef<int64_t> dims, hlo::Combiner combiner) {
  Type element = typeOf(a).getElementType();
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
  hlo::Shape shape = inferred(hlo::reduceShape(typeOf(a), typeOf(init), dims, errors()));
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
  int64_t rank = typeOf(ids).getRank(), dim = shapeOf(table)[1];
  SmallVector<int64_t> offsetDims = {rank}, collapsed = {0}, startIndexMap = {0},
                       sliceSizes = {1, dim};
  hlo::Shape shape = inferred(hlo::gatherShape(typeOf(table), typeOf(ids), offsetDims, collapsed,
                                               startIndexMap, rank, sliceSizes, errors()));
  return make<hlo::GatherOp>(tensor(shape, typeOf(table).getElementType()), table, ids,
                             offsetDims, collapsed, startIndexMap, /*index_vector_dim=*/rank,
                             sliceSizes);
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
