//===- KilnOps.cpp - kiln op shape rules, verifiers, costs, kernels -------===//
//
// For each op, in one place: the shape rule (inferReturnTypes, which doubles
// as the structural verifier so malformed IR is rejected with a message
// naming the op and its fqn), any extra attribute checks, the cost and the
// CPU kernel binding.
//
//===----------------------------------------------------------------------===//

#include "kiln/Dialect/Kiln/IR/KilnOps.h"
#include "kiln/Runtime/Kernels.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"

using namespace mlir;
using namespace kiln;

int64_t kiln::tensorBytes(TypeRange types) {
  int64_t total = 0;
  for (Type type : types)
    if (auto tensor = dyn_cast<RankedTensorType>(type))
      total += tensor.getNumElements() *
               ((tensor.getElementTypeBitWidth() + 7) / 8);
  return total;
}

#include "kiln/Dialect/Kiln/IR/KilnInterfaces.cpp.inc"

namespace {

/// Emits "'kiln.x' op (fqn 'a.b'): <message>" at `loc` (when given) and
/// returns failure; every shape rule reports through this.
template <typename OpT, typename... Args>
LogicalResult shapeError(std::optional<Location> loc, StringRef fqn,
                         Args &&...args) {
  return emitOptionalError(loc, "'", OpT::getOperationName(), "' op (fqn '",
                           fqn, "'): ", std::forward<Args>(args)...);
}

/// The ranked tensor type of `value`, or null (builders may pass anything).
RankedTensorType rankedType(Value value) {
  return value ? dyn_cast<RankedTensorType>(value.getType()) : nullptr;
}

RankedTensorType withShape(RankedTensorType type, ArrayRef<int64_t> shape) {
  return RankedTensorType::get(shape, type.getElementType());
}

int64_t leadingElements(RankedTensorType type) {
  return type.getRank() == 0 ? 1 : type.getNumElements() / type.getShape().back();
}

/// What an operand must be: its rank (-1: any rank >= 1) and element kind.
enum class Elt { Float, Id, F32 };
struct OperandSpec {
  StringRef name;
  Value value;
  int64_t rank;
  Elt elt;
};

bool isIdType(Type t) { return t.isSignlessInteger(64) || t.isSignlessInteger(32); }
bool isComputeFloat(Type t) { return t.isF32() || t.isBF16() || t.isF16(); }

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

} // namespace

//===----------------------------------------------------------------------===//
// EmbeddingOp
//===----------------------------------------------------------------------===//

LogicalResult EmbeddingOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &types) {
  StringRef fqn = adaptor.getFqn();
  if (failed(checkOperands<EmbeddingOp>(
          loc, fqn, {{"table", adaptor.getTable(), 2, Elt::Float},
                     {"ids", adaptor.getIds(), -1, Elt::Id}})))
    return failure();
  auto ids = rankedType(adaptor.getIds());
  auto table = rankedType(adaptor.getTable());
  SmallVector<int64_t> shape(ids.getShape());
  shape.push_back(table.getDimSize(1));
  types.push_back(withShape(table, shape));
  return success();
}

int64_t EmbeddingOp::getFlops() { return 0; }
// Only the gathered rows of the table are read.
int64_t EmbeddingOp::getBytesRead() {
  return tensorBytes(getIds().getType()) + tensorBytes(getResult().getType());
}
void EmbeddingOp::runOnCpu(ArrayRef<Tensor> in, SmallVectorImpl<Tensor> &out) {
  out.push_back(kernels::embedding(in[0], in[1]));
}

//===----------------------------------------------------------------------===//
// RmsNormOp
//===----------------------------------------------------------------------===//

LogicalResult RmsNormOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                          Adaptor adaptor,
                                          SmallVectorImpl<Type> &types) {
  StringRef fqn = adaptor.getFqn();
  if (failed(checkOperands<RmsNormOp>(
          loc, fqn, {{"input", adaptor.getInput(), -1, Elt::Float},
                     {"weight", adaptor.getWeight(), 1, Elt::Float}})))
    return failure();
  auto input = rankedType(adaptor.getInput());
  auto weight = rankedType(adaptor.getWeight());
  if (weight.getDimSize(0) != input.getShape().back())
    return shapeError<RmsNormOp>(loc, fqn, "weight ", weight,
                                 " must match the normalized (last) dimension of ",
                                 input);
  types.push_back(input);
  return success();
}

LogicalResult RmsNormOp::verify() {
  if (!(getEps().convertToFloat() > 0.0f))
    return emitOpError() << "(fqn '" << getFqn() << "'): eps must be positive, got "
                         << getEps().convertToFloat();
  return success();
}

int64_t RmsNormOp::getFlops() {
  return 4 * getInput().getType().getNumElements();
}
void RmsNormOp::runOnCpu(ArrayRef<Tensor> in, SmallVectorImpl<Tensor> &out) {
  out.push_back(kernels::rmsNorm(in[0], in[1], getEps().convertToFloat()));
}

//===----------------------------------------------------------------------===//
// LinearOp
//===----------------------------------------------------------------------===//

LogicalResult LinearOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &types) {
  StringRef fqn = adaptor.getFqn();
  if (failed(checkOperands<LinearOp>(
          loc, fqn, {{"input", adaptor.getInput(), -1, Elt::Float},
                     {"weight", adaptor.getWeight(), 2, Elt::Float}})))
    return failure();
  auto input = rankedType(adaptor.getInput());
  auto weight = rankedType(adaptor.getWeight());
  if (weight.getDimSize(1) != input.getShape().back())
    return shapeError<LinearOp>(loc, fqn, "weight ", weight,
                                " must be [out, in] with in = ",
                                input.getShape().back(), " (the last dimension of ",
                                input, ")");
  SmallVector<int64_t> shape(input.getShape());
  shape.back() = weight.getDimSize(0);
  types.push_back(withShape(input, shape));
  return success();
}

int64_t LinearOp::getFlops() {
  auto weight = getWeight().getType();
  return 2 * leadingElements(getInput().getType()) * weight.getNumElements();
}
void LinearOp::runOnCpu(ArrayRef<Tensor> in, SmallVectorImpl<Tensor> &out) {
  out.push_back(kernels::linear(in[0], in[1]));
}

//===----------------------------------------------------------------------===//
// RopeCacheOp
//===----------------------------------------------------------------------===//

LogicalResult RopeCacheOp::inferReturnTypes(MLIRContext *context,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &types) {
  StringRef fqn = adaptor.getFqn();
  int64_t seq = adaptor.getSeqLen(), headDim = adaptor.getHeadDim();
  if (seq <= 0)
    return shapeError<RopeCacheOp>(loc, fqn, "seq_len must be positive, got ", seq);
  if (headDim <= 0 || headDim % 2)
    return shapeError<RopeCacheOp>(loc, fqn,
                                   "head_dim must be positive and even, got ", headDim);
  if (!(adaptor.getTheta().convertToDouble() > 0))
    return shapeError<RopeCacheOp>(loc, fqn, "theta must be positive");
  types.push_back(RankedTensorType::get({seq, 2 * headDim}, Float32Type::get(context)));
  return success();
}

int64_t RopeCacheOp::getFlops() { return 2 * getSeqLen() * getHeadDim(); }
void RopeCacheOp::runOnCpu(ArrayRef<Tensor>, SmallVectorImpl<Tensor> &out) {
  out.push_back(kernels::ropeCache(getTheta().convertToDouble(), getSeqLen(),
                                   getHeadDim()));
}

//===----------------------------------------------------------------------===//
// RopeOp
//===----------------------------------------------------------------------===//

LogicalResult RopeOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                       Adaptor adaptor,
                                       SmallVectorImpl<Type> &types) {
  StringRef fqn = adaptor.getFqn();
  if (failed(checkOperands<RopeOp>(loc, fqn,
                                   {{"q", adaptor.getQ(), 4, Elt::Float},
                                    {"k", adaptor.getK(), 4, Elt::Float},
                                    {"cache", adaptor.getCache(), 2, Elt::F32}})))
    return failure();
  auto q = rankedType(adaptor.getQ()), k = rankedType(adaptor.getK());
  auto cache = rankedType(adaptor.getCache());
  int64_t seq = q.getDimSize(1), headDim = q.getDimSize(3);
  if (k.getDimSize(0) != q.getDimSize(0) || k.getDimSize(1) != seq ||
      k.getDimSize(3) != headDim)
    return shapeError<RopeOp>(loc, fqn, "k ", k,
                              " must share batch, seq and head_dim with q ", q);
  if (headDim % 2)
    return shapeError<RopeOp>(loc, fqn, "head_dim must be even, got ", headDim);
  if (cache.getDimSize(0) != seq || cache.getDimSize(1) != 2 * headDim)
    return shapeError<RopeOp>(loc, fqn, "cache ", cache, " must be [seq, 2 * head_dim] = [",
                              seq, ", ", 2 * headDim, "]");
  types.push_back(q);
  types.push_back(k);
  return success();
}

int64_t RopeOp::getFlops() {
  return 3 * (getQ().getType().getNumElements() + getK().getType().getNumElements());
}
void RopeOp::runOnCpu(ArrayRef<Tensor> in, SmallVectorImpl<Tensor> &out) {
  out.push_back(kernels::rope(in[0], in[2]));
  out.push_back(kernels::rope(in[1], in[2]));
}

//===----------------------------------------------------------------------===//
// AttentionOp
//===----------------------------------------------------------------------===//

LogicalResult AttentionOp::inferReturnTypes(MLIRContext *context,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &types) {
  StringRef fqn = adaptor.getFqn();
  if (failed(checkOperands<AttentionOp>(
          loc, fqn, {{"q", adaptor.getQ(), 4, Elt::Float},
                     {"k", adaptor.getK(), 4, Elt::Float},
                     {"v", adaptor.getV(), 4, Elt::Float}})))
    return failure();
  auto q = rankedType(adaptor.getQ()), k = rankedType(adaptor.getK());
  auto v = rankedType(adaptor.getV());
  if (k.getShape() != v.getShape())
    return shapeError<AttentionOp>(loc, fqn, "k ", k, " and v ", v,
                                   " must have the same shape");
  int64_t batch = q.getDimSize(0), seq = q.getDimSize(1), heads = q.getDimSize(2);
  if (k.getDimSize(0) != batch || k.getDimSize(1) != seq ||
      k.getDimSize(3) != q.getDimSize(3))
    return shapeError<AttentionOp>(loc, fqn, "k ", k,
                                   " must share batch, seq and head_dim with q ", q);
  int64_t kvHeads = k.getDimSize(2);
  if (kvHeads == 0 || heads % kvHeads)
    return shapeError<AttentionOp>(loc, fqn, "query heads (", heads,
                                   ") must be a multiple of kv heads (", kvHeads, ")");
  if (!(adaptor.getScale().convertToFloat() > 0.0f))
    return shapeError<AttentionOp>(loc, fqn, "scale must be positive");
  types.push_back(q);
  types.push_back(RankedTensorType::get({batch, heads, seq}, Float32Type::get(context)));
  return success();
}

int64_t AttentionOp::scoredPairs() {
  int64_t seq = getQ().getType().getDimSize(1);
  return getCausal() ? seq * (seq + 1) / 2 : seq * seq;
}
int64_t AttentionOp::getFlops() {
  auto q = getQ().getType();
  // Per scored pair: q.k and p*v (2 * head_dim multiply-adds) plus ~5 for
  // scale, max, exp, sum and normalize.
  return q.getDimSize(0) * q.getDimSize(2) * scoredPairs() * (4 * q.getDimSize(3) + 5);
}
void AttentionOp::runOnCpu(ArrayRef<Tensor> in, SmallVectorImpl<Tensor> &out) {
  auto [o, lse] = kernels::attention(in[0], in[1], in[2], getCausal(),
                                     getScale().convertToFloat());
  out.push_back(o);
  out.push_back(lse);
}

//===----------------------------------------------------------------------===//
// Elementwise: SwigluOp, AddOp
//===----------------------------------------------------------------------===//

/// Both operands of an elementwise binary op share one type, the result's.
template <typename OpT>
static LogicalResult inferSameType(std::optional<Location> loc, StringRef fqn,
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

LogicalResult SwigluOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &types) {
  return inferSameType<SwigluOp>(loc, adaptor.getFqn(), "gate", adaptor.getGate(),
                                 "up", adaptor.getUp(), types);
}
int64_t SwigluOp::getFlops() { return 5 * getGate().getType().getNumElements(); }
void SwigluOp::runOnCpu(ArrayRef<Tensor> in, SmallVectorImpl<Tensor> &out) {
  out.push_back(kernels::swiglu(in[0], in[1]));
}

LogicalResult AddOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                      Adaptor adaptor, SmallVectorImpl<Type> &types) {
  return inferSameType<AddOp>(loc, adaptor.getFqn(), "lhs", adaptor.getLhs(), "rhs",
                              adaptor.getRhs(), types);
}
int64_t AddOp::getFlops() { return getLhs().getType().getNumElements(); }
void AddOp::runOnCpu(ArrayRef<Tensor> in, SmallVectorImpl<Tensor> &out) {
  out.push_back(kernels::add(in[0], in[1]));
}

//===----------------------------------------------------------------------===//
// CrossEntropyOp
//===----------------------------------------------------------------------===//

LogicalResult CrossEntropyOp::inferReturnTypes(MLIRContext *context,
                                               std::optional<Location> loc,
                                               Adaptor adaptor,
                                               SmallVectorImpl<Type> &types) {
  StringRef fqn = adaptor.getFqn();
  if (failed(checkOperands<CrossEntropyOp>(
          loc, fqn, {{"logits", adaptor.getLogits(), -1, Elt::Float},
                     {"labels", adaptor.getLabels(), -1, Elt::Id}})))
    return failure();
  auto logits = rankedType(adaptor.getLogits());
  auto labels = rankedType(adaptor.getLabels());
  if (labels.getShape() != logits.getShape().drop_back())
    return shapeError<CrossEntropyOp>(loc, fqn, "labels ", adaptor.getLabels().getType(),
                                      " must have the leading shape of logits ", logits);
  types.push_back(RankedTensorType::get({}, Float32Type::get(context)));
  return success();
}

int64_t CrossEntropyOp::getFlops() {
  return 3 * getLogits().getType().getNumElements();
}
void CrossEntropyOp::runOnCpu(ArrayRef<Tensor> in, SmallVectorImpl<Tensor> &out) {
  out.push_back(kernels::crossEntropy(in[0], in[1]));
}

//===----------------------------------------------------------------------===//
// ReshapeOp
//===----------------------------------------------------------------------===//

LogicalResult ReshapeOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                          Adaptor adaptor,
                                          SmallVectorImpl<Type> &types) {
  StringRef fqn = adaptor.getFqn();
  auto input = rankedType(adaptor.getInput());
  if (!input || !input.hasStaticShape())
    return shapeError<ReshapeOp>(loc, fqn, "input must have a static shape");
  ArrayRef<int64_t> shape = adaptor.getShape();
  int64_t count = 1;
  for (int64_t dim : shape) {
    if (dim < 0)
      return shapeError<ReshapeOp>(loc, fqn, "target dimensions must be static and "
                                             "non-negative");
    count *= dim;
  }
  if (count != input.getNumElements())
    return shapeError<ReshapeOp>(loc, fqn, "cannot reshape ", input, " (",
                                 input.getNumElements(), " elements) to ", count,
                                 " elements");
  types.push_back(withShape(input, shape));
  return success();
}

// A reshape of a row-major tensor is a view: no work, no traffic.
int64_t ReshapeOp::getFlops() { return 0; }
int64_t ReshapeOp::getBytesRead() { return 0; }
int64_t ReshapeOp::getBytesWritten() { return 0; }
void ReshapeOp::runOnCpu(ArrayRef<Tensor> in, SmallVectorImpl<Tensor> &out) {
  out.push_back(in[0].reshaped(Shape(getShape().begin(), getShape().end())));
}

//===----------------------------------------------------------------------===//
// ShiftLabelsOp
//===----------------------------------------------------------------------===//

LogicalResult ShiftLabelsOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                              Adaptor adaptor,
                                              SmallVectorImpl<Type> &types) {
  StringRef fqn = adaptor.getFqn();
  if (failed(checkOperands<ShiftLabelsOp>(loc, fqn,
                                          {{"tokens", adaptor.getTokens(), 2, Elt::Id}})))
    return failure();
  auto tokens = rankedType(adaptor.getTokens());
  if (tokens.getDimSize(1) < 2)
    return shapeError<ShiftLabelsOp>(loc, fqn, "tokens must be [batch, seq + 1] with "
                                               "seq >= 1, got ",
                                     adaptor.getTokens().getType());
  auto shifted = withShape(tokens, {tokens.getDimSize(0), tokens.getDimSize(1) - 1});
  types.append({shifted, shifted});
  return success();
}

int64_t ShiftLabelsOp::getFlops() { return 0; }
void ShiftLabelsOp::runOnCpu(ArrayRef<Tensor> in, SmallVectorImpl<Tensor> &out) {
  auto [inputs, labels] = kernels::shiftLabels(in[0]);
  out.push_back(inputs);
  out.push_back(labels);
}

#define GET_OP_CLASSES
#include "kiln/Dialect/Kiln/IR/KilnOps.cpp.inc"
