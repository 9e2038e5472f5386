//===- ShapeRules.h - Helpers shared by the kiln ops' shape rules -*- C++ -*-===//
//
// Private to the dialect library: the checks and the diagnostic format every
// op's inferReturnTypes uses, so that all verifier messages read
// "'kiln.x' op (fqn 'a.b'): ...".
//
//===----------------------------------------------------------------------===//
#ifndef KILN_LIB_DIALECT_KILN_IR_SHAPERULES_H
#define KILN_LIB_DIALECT_KILN_IR_SHAPERULES_H

#include "kiln/Dialect/Kiln/IR/KilnOps.h"

#include "mlir/IR/Diagnostics.h"

namespace kiln::detail {

using namespace mlir;

/// Emits "'kiln.x' op (fqn 'a.b'): <message>" at `loc` (when given) and
/// returns failure; every shape rule reports through this.
template <typename OpT, typename... Args>
LogicalResult shapeError(std::optional<Location> loc, StringRef fqn,
                         Args &&...args) {
  return emitOptionalError(loc, "'", OpT::getOperationName(), "' op (fqn '",
                           fqn, "'): ", std::forward<Args>(args)...);
}

/// The ranked tensor type of `value`, or null (builders may pass anything).
inline RankedTensorType rankedType(Value value) {
  return value ? dyn_cast<RankedTensorType>(value.getType()) : nullptr;
}

inline RankedTensorType withShape(RankedTensorType type, ArrayRef<int64_t> shape) {
  return RankedTensorType::get(shape, type.getElementType());
}

/// `shape` with its last dimension replaced by `last`.
inline SmallVector<int64_t> withLast(ArrayRef<int64_t> shape, int64_t last) {
  SmallVector<int64_t> out(shape);
  out.back() = last;
  return out;
}

inline int64_t leadingElements(RankedTensorType type) {
  return type.getRank() == 0 ? 1 : type.getNumElements() / type.getShape().back();
}

/// What an operand must be: its rank (-1: any rank >= 1) and element kind.
enum class Elt { Float, Id, F32, I64 };
struct OperandSpec {
  StringRef name;
  Value value;
  int64_t rank;
  Elt elt;
};

inline bool isIdType(Type t) { return t.isSignlessInteger(64) || t.isSignlessInteger(32); }
inline bool isComputeFloat(Type t) { return t.isF32() || t.isBF16() || t.isF16(); }

/// Checks each operand's rank, static shape and element type, and that the
/// float operands (other than f32-only side inputs) share one element type.
/// ODS only asks for ranked tensors so that these messages, which name the
/// fqn, are the ones users see.
template <typename OpT>
LogicalResult checkOperands(std::optional<Location> loc, StringRef fqn,
                            ArrayRef<OperandSpec> operands) {
  Type floatType;
  for (const OperandSpec &spec : operands) {
    RankedTensorType type = rankedType(spec.value);
    if (!type)
      return shapeError<OpT>(loc, fqn, spec.name, " must be a ranked tensor");
    if (!type.hasStaticShape())
      return shapeError<OpT>(loc, fqn, spec.name, " must have a static shape, got ",
                             type);
    if (spec.rank >= 0 ? type.getRank() != spec.rank : type.getRank() < 1)
      return shapeError<OpT>(loc, fqn, spec.name, " must have rank ",
                             spec.rank >= 0 ? std::to_string(spec.rank) : ">= 1",
                             ", got ", type);
    Type elt = type.getElementType();
    switch (spec.elt) {
    case Elt::Id:
      if (!isIdType(elt))
        return shapeError<OpT>(loc, fqn, spec.name, " must hold i64 or i32 ids, got ",
                               type);
      break;
    case Elt::F32:
      if (!elt.isF32())
        return shapeError<OpT>(loc, fqn, spec.name, " must be f32, got ", type);
      break;
    case Elt::I64:
      if (!elt.isSignlessInteger(64))
        return shapeError<OpT>(loc, fqn, spec.name, " must be i64, got ", type);
      break;
    case Elt::Float:
      if (!isComputeFloat(elt))
        return shapeError<OpT>(loc, fqn, spec.name, " must be f32, bf16 or f16, got ",
                               type);
      if (floatType && elt != floatType)
        return shapeError<OpT>(loc, fqn, spec.name, " has element type ", elt,
                               " but the op computes in ", floatType);
      floatType = elt;
      break;
    }
  }
  return success();
}

/// Both operands of an elementwise binary op share one type, the result's.
template <typename OpT>
LogicalResult inferSameType(std::optional<Location> loc, StringRef fqn,
                                   StringRef lhsName, Value lhs, StringRef rhsName,
                                   Value rhs, SmallVectorImpl<Type> &types) {
  if (failed(checkOperands<OpT>(
          loc, fqn, {{lhsName, lhs, -1, Elt::Float}, {rhsName, rhs, -1, Elt::Float}})))
    return failure();
  if (lhs.getType() != rhs.getType())
    return shapeError<OpT>(loc, fqn, lhsName, " ", lhs.getType(), " and ", rhsName,
                           " ", rhs.getType(), " must have the same type");
  types.push_back(lhs.getType());
  return success();
}

/// rope and rope_backward: q [b, s, h, d] and k [b, s, hkv, d] (named as the
/// op names them), cache [s, 2d] f32; the results have q's and k's types.
template <typename OpT>
LogicalResult inferRopeTypes(std::optional<Location> loc, StringRef fqn, StringRef qName,
                             Value qValue, StringRef kName, Value kValue, Value cacheValue,
                             SmallVectorImpl<Type> &types) {
  if (failed(checkOperands<OpT>(loc, fqn,
                                {{qName, qValue, 4, Elt::Float},
                                 {kName, kValue, 4, Elt::Float},
                                 {"cache", cacheValue, 2, Elt::F32}})))
    return failure();
  auto q = rankedType(qValue), k = rankedType(kValue), cache = rankedType(cacheValue);
  int64_t seq = q.getDimSize(1), headDim = q.getDimSize(3);
  if (k.getDimSize(0) != q.getDimSize(0) || k.getDimSize(1) != seq ||
      k.getDimSize(3) != headDim)
    return shapeError<OpT>(loc, fqn, kName, " ", k, " must share batch, seq and head_dim with ",
                           qName, " ", q);
  if (headDim % 2)
    return shapeError<OpT>(loc, fqn, "head_dim must be even, got ", headDim);
  if (cache.getDimSize(0) != seq || cache.getDimSize(1) != 2 * headDim)
    return shapeError<OpT>(loc, fqn, "cache ", cache, " must be [seq, 2 * head_dim] = [", seq,
                           ", ", 2 * headDim, "]");
  types.push_back(q);
  types.push_back(k);
  return success();
}

/// attention and attention_backward: q [b, s, h, d], k and v [b, s, hkv, d]
/// with h a multiple of hkv, and a positive scale.
template <typename OpT>
LogicalResult checkAttentionOperands(std::optional<Location> loc, StringRef fqn, Value qValue,
                                     Value kValue, Value vValue, APFloat scale) {
  if (failed(checkOperands<OpT>(loc, fqn,
                                {{"q", qValue, 4, Elt::Float},
                                 {"k", kValue, 4, Elt::Float},
                                 {"v", vValue, 4, Elt::Float}})))
    return failure();
  auto q = rankedType(qValue), k = rankedType(kValue), v = rankedType(vValue);
  if (k.getShape() != v.getShape())
    return shapeError<OpT>(loc, fqn, "k ", k, " and v ", v, " must have the same shape");
  if (k.getDimSize(0) != q.getDimSize(0) || k.getDimSize(3) != q.getDimSize(3))
    return shapeError<OpT>(loc, fqn, "k ", k, " must share batch and head_dim with q ", q);
  // q may be a block of the sequence (context parallelism): its length
  // divides k's.
  if (q.getDimSize(1) == 0 || k.getDimSize(1) % q.getDimSize(1))
    return shapeError<OpT>(loc, fqn, "q's sequence (", q.getDimSize(1), ") must be k's (",
                           k.getDimSize(1), ") or a block of it");
  int64_t heads = q.getDimSize(2), kvHeads = k.getDimSize(2);
  if (kvHeads == 0 || heads % kvHeads)
    return shapeError<OpT>(loc, fqn, "query heads (", heads,
                           ") must be a multiple of kv heads (", kvHeads, ")");
  if (!(scale.convertToFloat() > 0.0f))
    return shapeError<OpT>(loc, fqn, "scale must be positive");
  return success();
}

/// The log-sum-exp saved by attention: [b, h, s] f32 for q [b, s, h, d].
inline RankedTensorType lseType(MLIRContext *context, RankedTensorType q) {
  return RankedTensorType::get({q.getDimSize(0), q.getDimSize(2), q.getDimSize(1)},
                               Float32Type::get(context));
}

/// Number of (query, key) pairs scored per (batch, head), in double: a FLOP
/// count's factor (seq^2 passes int64 for seq > 3e9). A block of `queries`
/// of the `seq` rows scores its share of them (exact under head-tail load
/// balancing, the mean over blocks without it).
inline double scoredPairs(int64_t seq, bool causal, int64_t queries = -1) {
  double s = double(seq), share = queries < 0 ? 1.0 : double(queries) / s;
  return (causal ? s * (s + 1) / 2 : s * s) * share;
}

/// Per-row operands of a loss (labels, row maxima) have the logits' leading
/// shape: `name` `type` against `logits`.
template <typename OpT>
LogicalResult checkLogitRows(std::optional<Location> loc, StringRef fqn, StringRef name,
                             RankedTensorType type, RankedTensorType logits) {
  if (type.getShape() != logits.getShape().drop_back())
    return shapeError<OpT>(loc, fqn, name, " ", type, " must have the leading shape of logits ",
                           logits);
  return success();
}

/// Grid axes an op's local work is a block of (`vocab_axes` of kiln.embedding
/// and the vocab_parallel ops, `expert_axes` of the grouped experts):
/// distinct, each an axis of the enclosing module's grid when it has one.
LogicalResult verifyGridAxes(Operation *op, std::optional<ArrayRef<int16_t>> axes,
                             StringRef attrName = "vocab_axes");
inline LogicalResult verifyVocabAxes(Operation *op, std::optional<ArrayRef<int16_t>> axes) {
  return verifyGridAxes(op, axes);
}

/// Context parallelism's attributes of kiln.attention and its backward: q is
/// k's whole sequence unless `query_axes` makes it a block; a head-tail
/// layout has an even number (2 x cp) of chunks that divides the sequence.
LogicalResult verifyAttentionLayout(Operation *op, TypedValue<RankedTensorType> q,
                                    TypedValue<RankedTensorType> k,
                                    std::optional<ArrayRef<int16_t>> queryAxes,
                                    std::optional<uint64_t> headTailChunks);

} // namespace kiln::detail

#endif // KILN_LIB_DIALECT_KILN_IR_SHAPERULES_H
