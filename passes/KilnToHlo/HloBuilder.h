//===- HloBuilder.h - Emitting hlo ops with their result types ---*- C++ -*-===//
//
// Shorthands for building hlo dialect ops at one location: each computes its
// result type the way XLA's shape inference does, so the lowerings read as
// the math they implement. Used by kiln-lower-to-hlo only.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_PASSES_HLOBUILDER_H
#define KILN_PASSES_HLOBUILDER_H

#include "kiln/Dialect/Hlo/IR/HloOps.h"
#include "kiln/Dialect/Hlo/IR/HloShapes.h"

#include "mlir/IR/Builders.h"

#include <functional>

namespace kiln {

class HloBuilder {
public:
  HloBuilder(mlir::OpBuilder &b, mlir::Location loc)
      : b(b), loc(loc), errorAtLocation([loc] { return mlir::emitError(loc); }) {}

  mlir::OpBuilder &builder() { return b; }
  mlir::Location location() const { return loc; }
  static mlir::RankedTensorType typeOf(mlir::Value v);
  /// A shape rule's errors (HloShapes.h), at the builder's location.
  hlo::EmitShapeError errors();
  /// The shape a rule gives; a rule that refuses a lowering's operands is a
  /// bug in the lowering (a fatal error after the rule's diagnostic).
  hlo::Shape inferred(mlir::FailureOr<hlo::Shape> shape);
  static llvm::ArrayRef<int64_t> shapeOf(mlir::Value v) { return typeOf(v).getShape(); }
  mlir::RankedTensorType tensor(llvm::ArrayRef<int64_t> shape, mlir::Type element);
  mlir::Type f32() { return b.getF32Type(); }
  mlir::Type i32() { return b.getI32Type(); }

  // Leaves.
  /// A scalar of `element` type (float or integer).
  mlir::Value scalar(mlir::Type element, double value);
  /// `value` everywhere in a tensor of `type` (a scalar broadcast: XLA text
  /// has no splat literal).
  mlir::Value splat(mlir::RankedTensorType type, double value);
  mlir::Value splatLike(mlir::Value like, double value) { return splat(typeOf(like), value); }
  mlir::Value constantI32(llvm::ArrayRef<int32_t> values);
  mlir::Value constantF32(llvm::ArrayRef<float> values);
  mlir::Value iota(llvm::ArrayRef<int64_t> shape, int64_t dim, mlir::Type element);

  // Elementwise.
  mlir::Value add(mlir::Value a, mlir::Value c);
  mlir::Value sub(mlir::Value a, mlir::Value c);
  mlir::Value mul(mlir::Value a, mlir::Value c);
  mlir::Value div(mlir::Value a, mlir::Value c);
  mlir::Value max(mlir::Value a, mlir::Value c);
  mlir::Value min(mlir::Value a, mlir::Value c);
  mlir::Value pow(mlir::Value a, mlir::Value c);
  mlir::Value logicalAnd(mlir::Value a, mlir::Value c);
  mlir::Value neg(mlir::Value a);
  mlir::Value exp(mlir::Value a);
  mlir::Value log(mlir::Value a);
  mlir::Value rsqrt(mlir::Value a);
  mlir::Value sqrt(mlir::Value a);
  mlir::Value cos(mlir::Value a);
  mlir::Value sin(mlir::Value a);
  mlir::Value sign(mlir::Value a);
  /// a op scalar constant.
  mlir::Value addScalar(mlir::Value a, double s) { return add(a, splatLike(a, s)); }
  mlir::Value mulScalar(mlir::Value a, double s) { return mul(a, splatLike(a, s)); }
  mlir::Value convert(mlir::Value a, mlir::Type element);
  /// A float32 `a` rounded to the narrow float `narrow` and held in float32
  /// (kiln.cast): the narrowing convert and the widening one back. A null
  /// `narrow` returns `a`.
  mlir::Value roundTo(mlir::Value a, mlir::Type narrow);
  mlir::Value compare(mlir::Value a, mlir::Value c, hlo::ComparisonDirection dir);
  mlir::Value select(mlir::Value pred, mlir::Value onTrue, mlir::Value onFalse);

  // Shapes.
  mlir::Value broadcast(mlir::Value a, llvm::ArrayRef<int64_t> shape,
                        llvm::ArrayRef<int64_t> dims);
  /// `a`'s dimensions become the leading dimensions of `shape` (a row
  /// statistic back over its rows).
  mlir::Value broadcastLeading(mlir::Value a, llvm::ArrayRef<int64_t> shape);
  /// `a` [n] over the last dimension of `shape`.
  mlir::Value broadcastLast(mlir::Value a, llvm::ArrayRef<int64_t> shape);
  mlir::Value reshape(mlir::Value a, llvm::ArrayRef<int64_t> shape);
  /// `a` itself for the identity permutation.
  mlir::Value transpose(mlir::Value a, llvm::ArrayRef<int64_t> perm);
  mlir::Value concat(mlir::ValueRange values, int64_t dim);
  /// [start, limit) of dimension `dim`, the rest whole.
  mlir::Value slice(mlir::Value a, int64_t dim, int64_t start, int64_t limit);
  /// `size` entries of `dim` from a dynamic scalar start, the rest whole.
  mlir::Value dynamicSlice(mlir::Value a, int64_t dim, mlir::Value start, int64_t size);
  /// Zero-pads `dim` at its end to `size`.
  mlir::Value padEnd(mlir::Value a, int64_t dim, int64_t size);
  /// `before` zeros in front of `dim` and `after` behind it.
  mlir::Value padZeros(mlir::Value a, int64_t dim, int64_t before, int64_t after);

  // Contractions and reductions.
  mlir::Value dot(mlir::Value lhs, mlir::Value rhs, llvm::ArrayRef<int64_t> lhsBatch,
                  llvm::ArrayRef<int64_t> rhsBatch, llvm::ArrayRef<int64_t> lhsContract,
                  llvm::ArrayRef<int64_t> rhsContract);
  mlir::Value reduce(mlir::Value a, llvm::ArrayRef<int64_t> dims, hlo::Combiner combiner);
  mlir::Value sum(mlir::Value a, llvm::ArrayRef<int64_t> dims) {
    return reduce(a, dims, hlo::Combiner::add);
  }
  /// Sum / max over the last dimension.
  mlir::Value sumLast(mlir::Value a);
  mlir::Value maxLast(mlir::Value a);
  /// Sum over every dimension to a scalar.
  mlir::Value sumAll(mlir::Value a);

  // Indexing.
  /// rows[ids] of a [rows, dim] table: ids [...] (s32) -> [..., dim].
  mlir::Value gatherRows(mlir::Value table, mlir::Value ids);
  /// `zeros` [rows, dim] plus, for each id, its row of `updates` [..., dim].
  mlir::Value scatterAddRows(mlir::Value zeros, mlir::Value ids, mlir::Value updates);
  /// The one-hot mask [..., n] of ids [...] (s32) against 0..n-1 + offset.
  mlir::Value oneHot(mlir::Value ids, int64_t n, mlir::Value offset = {});

private:
  template <typename OpT, typename... Args> mlir::Value make(Args &&...args) {
    return OpT::create(b, loc, std::forward<Args>(args)...).getResult();
  }
  mlir::OpBuilder &b;
  mlir::Location loc;
  /// What errors() refers to: it lives as long as the builder.
  std::function<mlir::InFlightDiagnostic()> errorAtLocation;
};

} // namespace kiln

#endif // KILN_PASSES_HLOBUILDER_H
