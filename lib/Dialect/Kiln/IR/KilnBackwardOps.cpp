//===- KilnBackwardOps.cpp - Shape rules and costs of backward ops --------===//

#include "ShapeRules.h"

using namespace mlir;
using namespace kiln;
using namespace kiln::detail;

//===----------------------------------------------------------------------===//
// ConstantOp
//===----------------------------------------------------------------------===//

LogicalResult ConstantOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                           Adaptor adaptor, SmallVectorImpl<Type> &types) {
  auto value = dyn_cast<SplatElementsAttr>(adaptor.getValue());
  auto type = value ? dyn_cast<RankedTensorType>(value.getType()) : nullptr;
  if (!type || !isComputeFloat(type.getElementType()))
    return shapeError<ConstantOp>(loc, adaptor.getFqn(),
                                  "value must be a splat of f32, bf16 or f16");
  types.push_back(type);
  return success();
}
double ConstantOp::getFlops() { return 0; }

//===----------------------------------------------------------------------===//
// EmbeddingBackwardOp
//===----------------------------------------------------------------------===//

LogicalResult EmbeddingBackwardOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                                    Adaptor adaptor,
                                                    SmallVectorImpl<Type> &types) {
  StringRef fqn = adaptor.getFqn();
  if (failed(checkOperands<EmbeddingBackwardOp>(loc, fqn,
                                                {{"grad", adaptor.getGrad(), -1, Elt::Float},
                                                 {"ids", adaptor.getIds(), -1, Elt::Id}})))
    return failure();
  auto grad = rankedType(adaptor.getGrad()), ids = rankedType(adaptor.getIds());
  if (grad.getShape().drop_back() != ids.getShape())
    return shapeError<EmbeddingBackwardOp>(loc, fqn, "grad ", grad,
                                           " must be ids' shape plus the embedding dim, ids ",
                                           ids);
  int64_t vocab = int64_t(adaptor.getVocabSize());
  if (vocab <= 0)
    return shapeError<EmbeddingBackwardOp>(loc, fqn, "vocab_size must be positive");
  types.push_back(withShape(grad, {vocab, grad.getShape().back()}));
  return success();
}
LogicalResult EmbeddingBackwardOp::verify() { return verifyVocabAxes(*this, getVocabAxes()); }
double EmbeddingBackwardOp::getFlops() { return double(getGrad().getType().getNumElements()); }

//===----------------------------------------------------------------------===//
// RmsNormBackwardOp
//===----------------------------------------------------------------------===//

LogicalResult RmsNormBackwardOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                                  Adaptor adaptor,
                                                  SmallVectorImpl<Type> &types) {
  StringRef fqn = adaptor.getFqn();
  SmallVector<Type> forward;
  if (failed(inferSameType<RmsNormBackwardOp>(loc, fqn, "grad", adaptor.getGrad(), "input",
                                              adaptor.getInput(), forward)) ||
      failed(checkOperands<RmsNormBackwardOp>(
          loc, fqn, {{"input", adaptor.getInput(), -1, Elt::Float},
                     {"weight", adaptor.getWeight(), 1, Elt::Float}})))
    return failure();
  auto input = rankedType(adaptor.getInput()), weight = rankedType(adaptor.getWeight());
  if (weight.getDimSize(0) != input.getShape().back())
    return shapeError<RmsNormBackwardOp>(loc, fqn, "weight ", weight,
                                         " must match the normalized (last) dimension of ",
                                         input);
  types.append({input, weight});
  return success();
}
double RmsNormBackwardOp::getFlops() { return 8.0 * getInput().getType().getNumElements(); }

//===----------------------------------------------------------------------===//
// LinearBackwardDataOp, LinearBackwardWeightOp
//===----------------------------------------------------------------------===//

LogicalResult LinearBackwardDataOp::inferReturnTypes(MLIRContext *,
                                                     std::optional<Location> loc,
                                                     Adaptor adaptor,
                                                     SmallVectorImpl<Type> &types) {
  StringRef fqn = adaptor.getFqn();
  if (failed(checkOperands<LinearBackwardDataOp>(
          loc, fqn, {{"grad", adaptor.getGrad(), -1, Elt::Float},
                     {"weight", adaptor.getWeight(), 2, Elt::Float}})))
    return failure();
  auto grad = rankedType(adaptor.getGrad()), weight = rankedType(adaptor.getWeight());
  if (weight.getDimSize(0) != grad.getShape().back())
    return shapeError<LinearBackwardDataOp>(loc, fqn, "weight ", weight,
                                            " must be [out, in] with out = ",
                                            grad.getShape().back(), " (from grad ", grad, ")");
  SmallVector<int64_t> shape(grad.getShape());
  shape.back() = weight.getDimSize(1);
  types.push_back(withShape(grad, shape));
  return success();
}
double LinearBackwardDataOp::getFlops() {
  return 2.0 * leadingElements(getGrad().getType()) * getWeight().getType().getNumElements();
}

// As kernels::linearBackwardData: dx[rows, in] = grad[rows, out] weight[out, in].
void LinearBackwardDataOp::getGemms(SmallVectorImpl<GemmShape> &gemms) {
  auto weight = getWeight().getType();
  gemms.push_back({leadingElements(getGrad().getType()), weight.getDimSize(1),
                   weight.getDimSize(0), false, false});
}

LogicalResult LinearBackwardWeightOp::inferReturnTypes(MLIRContext *,
                                                       std::optional<Location> loc,
                                                       Adaptor adaptor,
                                                       SmallVectorImpl<Type> &types) {
  StringRef fqn = adaptor.getFqn();
  if (failed(checkOperands<LinearBackwardWeightOp>(
          loc, fqn, {{"grad", adaptor.getGrad(), -1, Elt::Float},
                     {"input", adaptor.getInput(), -1, Elt::Float}})))
    return failure();
  auto grad = rankedType(adaptor.getGrad()), input = rankedType(adaptor.getInput());
  if (grad.getShape().drop_back() != input.getShape().drop_back())
    return shapeError<LinearBackwardWeightOp>(loc, fqn, "grad ", grad, " and input ", input,
                                              " must share their leading dimensions");
  types.push_back(withShape(grad, {grad.getShape().back(), input.getShape().back()}));
  return success();
}
double LinearBackwardWeightOp::getFlops() {
  return 2.0 * leadingElements(getGrad().getType()) *
         getWeightGrad().getType().getNumElements();
}

// As kernels::linearBackwardWeight: dw[out, in] = grad[rows, out]^T x[rows, in].
void LinearBackwardWeightOp::getGemms(SmallVectorImpl<GemmShape> &gemms) {
  auto dw = getWeightGrad().getType();
  gemms.push_back({dw.getDimSize(0), dw.getDimSize(1), leadingElements(getGrad().getType()),
                   true, false});
}

//===----------------------------------------------------------------------===//
// RopeBackwardOp
//===----------------------------------------------------------------------===//

LogicalResult RopeBackwardOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                               Adaptor adaptor, SmallVectorImpl<Type> &types) {
  return inferRopeTypes<RopeBackwardOp>(loc, adaptor.getFqn(), "q_grad", adaptor.getQGrad(),
                                        "k_grad", adaptor.getKGrad(), adaptor.getCache(),
                                        types);
}
double RopeBackwardOp::getFlops() {
  return 3.0 * (getQGrad().getType().getNumElements() + getKGrad().getType().getNumElements());
}

//===----------------------------------------------------------------------===//
// AttentionBackwardOp
//===----------------------------------------------------------------------===//

LogicalResult AttentionBackwardOp::inferReturnTypes(MLIRContext *context,
                                                    std::optional<Location> loc,
                                                    Adaptor adaptor,
                                                    SmallVectorImpl<Type> &types) {
  StringRef fqn = adaptor.getFqn();
  if (failed(checkAttentionOperands<AttentionBackwardOp>(loc, fqn, adaptor.getQ(),
                                                         adaptor.getK(), adaptor.getV(),
                                                         adaptor.getScale())))
    return failure();
  auto q = rankedType(adaptor.getQ());
  for (auto [name, value] : {std::pair<StringRef, Value>{"out_grad", adaptor.getOutGrad()},
                             std::pair<StringRef, Value>{"out", adaptor.getOut()}})
    if (value.getType() != q)
      return shapeError<AttentionBackwardOp>(loc, fqn, name, " ", value.getType(),
                                             " must have q's type ", q);
  if (adaptor.getLse().getType() != lseType(context, q))
    return shapeError<AttentionBackwardOp>(loc, fqn, "lse ", adaptor.getLse().getType(),
                                           " must be ", lseType(context, q));
  types.append({q, adaptor.getK().getType(), adaptor.getV().getType()});
  return success();
}
LogicalResult AttentionBackwardOp::verify() {
  return verifyAttentionLayout(*this, getQ(), getK(), getQueryAxes(), getHeadTailChunks());
}

double AttentionBackwardOp::getFlops() {
  auto q = getQ().getType();
  return attentionFlops(q.getDimSize(0), getK().getType().getDimSize(1), q.getDimSize(2),
                        q.getDimSize(3), getCausal(), /*backward=*/true, q.getDimSize(1));
}

//===----------------------------------------------------------------------===//
// SwigluBackwardOp
//===----------------------------------------------------------------------===//

LogicalResult SwigluBackwardOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                                 Adaptor adaptor,
                                                 SmallVectorImpl<Type> &types) {
  StringRef fqn = adaptor.getFqn();
  SmallVector<Type> scratch;
  if (failed(inferSameType<SwigluBackwardOp>(loc, fqn, "out_grad", adaptor.getOutGrad(),
                                             "gate", adaptor.getGate(), scratch)) ||
      failed(inferSameType<SwigluBackwardOp>(loc, fqn, "gate", adaptor.getGate(), "up",
                                             adaptor.getUp(), scratch)))
    return failure();
  types.append({adaptor.getGate().getType(), adaptor.getUp().getType()});
  return success();
}
double SwigluBackwardOp::getFlops() { return 10.0 * getGate().getType().getNumElements(); }

//===----------------------------------------------------------------------===//
// CrossEntropyBackwardOp
//===----------------------------------------------------------------------===//

LogicalResult CrossEntropyBackwardOp::inferReturnTypes(MLIRContext *,
                                                       std::optional<Location> loc,
                                                       Adaptor adaptor,
                                                       SmallVectorImpl<Type> &types) {
  StringRef fqn = adaptor.getFqn();
  if (failed(checkOperands<CrossEntropyBackwardOp>(
          loc, fqn, {{"logits", adaptor.getLogits(), -1, Elt::Float},
                     {"labels", adaptor.getLabels(), -1, Elt::Id},
                     {"loss_grad", adaptor.getLossGrad(), 0, Elt::F32}})))
    return failure();
  auto logits = rankedType(adaptor.getLogits());
  if (failed(checkLogitRows<CrossEntropyBackwardOp>(loc, fqn, "labels",
                                                    rankedType(adaptor.getLabels()), logits)))
    return failure();
  types.push_back(logits);
  return success();
}
double CrossEntropyBackwardOp::getFlops() {
  return 4.0 * getLogits().getType().getNumElements();
}
