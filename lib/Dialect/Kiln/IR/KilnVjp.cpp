//===- KilnVjp.cpp - Vector-Jacobian products of the forward ops ----------===//
//
// Each forward op's VjpOpInterface: given the cotangents of its results, emit
// kiln ops computing the cotangents of its operands. Backward ops keep the
// forward op's location and fqn, since they run the same module's backward.
//
//===----------------------------------------------------------------------===//

#include "kiln/Dialect/Kiln/IR/KilnOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"

using namespace mlir;
using namespace kiln;

Value kiln::gradOrZeros(OpBuilder &b, Operation *op, Value grad, Value like) {
  if (grad)
    return grad;
  auto type = cast<RankedTensorType>(like.getType());
  auto zero = SplatElementsAttr::get(type, b.getFloatAttr(type.getElementType(), 0.0));
  return ConstantOp::create(b, op->getLoc(), zero,
                            b.getStringAttr(op->getAttrOfType<StringAttr>("fqn").str() +
                                            ".zero_grad"));
}

LogicalResult EmbeddingOp::buildVjp(OpBuilder &b, ArrayRef<Value> gradOut,
                           SmallVectorImpl<Value> &gradIn) {
  int64_t vocab = getTable().getType().getDimSize(0);
  gradIn.push_back(EmbeddingBackwardOp::create(b, getLoc(), gradOut[0], getIds(),
                                               b.getI64IntegerAttr(vocab), getFqnAttr(),
                                               getVocabAxesAttr()));
  gradIn.push_back(nullptr);
  return success();
}

LogicalResult RmsNormOp::buildVjp(OpBuilder &b, ArrayRef<Value> gradOut,
                         SmallVectorImpl<Value> &gradIn) {
  auto bwd = RmsNormBackwardOp::create(b, getLoc(), gradOut[0], getInput(), getWeight(),
                                       getEpsAttr(), getFqnAttr());
  gradIn.append({bwd.getInputGrad(), bwd.getWeightGrad()});
  return success();
}

LogicalResult LinearOp::buildVjp(OpBuilder &b, ArrayRef<Value> gradOut,
                        SmallVectorImpl<Value> &gradIn) {
  gradIn.push_back(
      LinearBackwardDataOp::create(b, getLoc(), gradOut[0], getWeight(), getFqnAttr()));
  gradIn.push_back(
      LinearBackwardWeightOp::create(b, getLoc(), gradOut[0], getInput(), getFqnAttr()));
  return success();
}

LogicalResult RopeCacheOp::buildVjp(OpBuilder &, ArrayRef<Value>, SmallVectorImpl<Value> &) {
  return success();
}

LogicalResult RopeOp::buildVjp(OpBuilder &b, ArrayRef<Value> gradOut, SmallVectorImpl<Value> &gradIn) {
  Operation *op = getOperation();
  auto bwd = RopeBackwardOp::create(b, getLoc(), gradOrZeros(b, op, gradOut[0], getQOut()),
                                    gradOrZeros(b, op, gradOut[1], getKOut()), getCache(),
                                    getFqnAttr());
  gradIn.append({bwd.getQInputGrad(), bwd.getKInputGrad(), nullptr});
  return success();
}

LogicalResult AttentionOp::buildVjp(OpBuilder &b, ArrayRef<Value> gradOut,
                           SmallVectorImpl<Value> &gradIn) {
  // lse is saved for the backward; nothing differentiates through it.
  if (gradOut[1])
    return emitOpError() << "(fqn '" << getFqn()
                         << "'): the log-sum-exp result 'lse' has a cotangent, but attention "
                            "has no VJP for it (lse may only feed attention_backward)";
  auto bwd = AttentionBackwardOp::create(
      b, getLoc(), gradOrZeros(b, getOperation(), gradOut[0], getOut()), getQ(), getK(), getV(),
      getOut(), getLse(), getCausalAttr(), getScaleAttr(), getFqnAttr(), getQueryAxesAttr(),
      getHeadTailChunksAttr());
  gradIn.append({bwd.getQGrad(), bwd.getKGrad(), bwd.getVGrad()});
  return success();
}

LogicalResult SwigluOp::buildVjp(OpBuilder &b, ArrayRef<Value> gradOut,
                        SmallVectorImpl<Value> &gradIn) {
  auto bwd = SwigluBackwardOp::create(b, getLoc(), gradOut[0], getGate(), getUp(),
                                      getFqnAttr());
  gradIn.append({bwd.getGateGrad(), bwd.getUpGrad()});
  return success();
}

LogicalResult AddOp::buildVjp(OpBuilder &, ArrayRef<Value> gradOut, SmallVectorImpl<Value> &gradIn) {
  gradIn.append({gradOut[0], gradOut[0]});
  return success();
}

LogicalResult CastOp::buildVjp(OpBuilder &b, ArrayRef<Value> gradOut,
                               SmallVectorImpl<Value> &gradIn) {
  // The gradient of a bf16 tensor is bf16 (torch's autograd of .to(bf16)).
  gradIn.push_back(CastOp::create(b, getLoc(), gradOut[0], getToAttr(), getFqnAttr()));
  return success();
}

LogicalResult CrossEntropyOp::buildVjp(OpBuilder &b, ArrayRef<Value> gradOut,
                              SmallVectorImpl<Value> &gradIn) {
  gradIn.push_back(CrossEntropyBackwardOp::create(b, getLoc(), getLogits(), getLabels(),
                                                  gradOut[0], getFqnAttr(),
                                                  getTotalPositionsAttr()));
  gradIn.push_back(nullptr);
  return success();
}

LogicalResult ReshapeOp::buildVjp(OpBuilder &b, ArrayRef<Value> gradOut,
                         SmallVectorImpl<Value> &gradIn) {
  auto shape = getInput().getType().getShape();
  gradIn.push_back(ReshapeOp::create(b, getLoc(), gradOut[0], b.getDenseI64ArrayAttr(shape),
                                     getFqnAttr()));
  return success();
}

// A constant is a leaf: it has no operands to differentiate.
LogicalResult ConstantOp::buildVjp(OpBuilder &, ArrayRef<Value>, SmallVectorImpl<Value> &) {
  return success();
}

//===----------------------------------------------------------------------===//
// Mixture of experts
//===----------------------------------------------------------------------===//

LogicalResult RouterOp::buildVjp(OpBuilder &b, ArrayRef<Value> gradOut,
                                 SmallVectorImpl<Value> &gradIn) {
  if (gradOut[1])
    return emitOpError() << "(fqn '" << getFqn()
                         << "'): the selected expert ids have a cotangent, but the top-k "
                            "choice is not differentiable";
  Operation *op = getOperation();
  gradIn.push_back(RouterBackwardOp::create(
      b, getLoc(), getProbs(), getExperts(), gradOrZeros(b, op, gradOut[0], getWeights()),
      gradOrZeros(b, op, gradOut[2], getProbs()), getNormTopkProbAttr(), getFqnAttr()));
  if (getExpertBias()) // selection only: no gradient
    gradIn.push_back(nullptr);
  return success();
}

LogicalResult GroupedExpertsOp::buildVjp(OpBuilder &b, ArrayRef<Value> gradOut,
                                         SmallVectorImpl<Value> &gradIn) {
  auto bwd = GroupedExpertsBackwardOp::create(b, getLoc(), gradOut[0], getInput(), getWeights(),
                                              getExperts(), getW1(), getW3(), getW2(),
                                              getFqnAttr(), getExpertAxesAttr(),
                                              getNumExpertsAttr(), getBlockedAttr(),
                                              getRoundToAttr());
  gradIn.append({bwd.getInputGrad(), bwd.getWeightsGrad(), nullptr, bwd.getW1Grad(),
                 bwd.getW3Grad(), bwd.getW2Grad()});
  return success();
}

LogicalResult ExpertDispatchOp::buildVjp(OpBuilder &b, ArrayRef<Value> gradOut,
                                         SmallVectorImpl<Value> &gradIn) {
  if (gradOut[2] || gradOut[3])
    return emitOpError() << "(fqn '" << getFqn()
                         << "'): the dispatch's expert ids and slots have a cotangent, but "
                            "placement is not differentiable";
  Operation *op = getOperation();
  auto bwd = ExpertDispatchBackwardOp::create(
      b, getLoc(), getSlots(), gradOrZeros(b, op, gradOut[0], getRows()),
      gradOrZeros(b, op, gradOut[1], getRowWeights()), getChunksAttr(), getFqnAttr());
  gradIn.append({bwd.getInputGrad(), bwd.getWeightsGrad(), nullptr});
  return success();
}

LogicalResult ExpertCombineOp::buildVjp(OpBuilder &b, ArrayRef<Value> gradOut,
                                        SmallVectorImpl<Value> &gradIn) {
  auto rows = getRows().getType();
  int64_t chunks = int64_t(getChunks());
  gradIn.push_back(nullptr);
  gradIn.push_back(ExpertCombineBackwardOp::create(
      b, getLoc(), gradOut[0], getSlots(), b.getI64IntegerAttr(rows.getDimSize(0)),
      getChunksAttr(), b.getI64IntegerAttr(rows.getDimSize(1) / chunks), getFqnAttr()));
  return success();
}

LogicalResult LoadBalancingLossOp::buildVjp(OpBuilder &b, ArrayRef<Value> gradOut,
                                            SmallVectorImpl<Value> &gradIn) {
  int64_t experts = cast<RankedTensorType>(getProbs()[0].getType()).getShape().back();
  auto bwd = LoadBalancingLossBackwardOp::create(b, getLoc(), gradOut[0], getExperts(),
                                                 b.getI64IntegerAttr(experts), getFqnAttr());
  gradIn.append(bwd.getProbsGrad().begin(), bwd.getProbsGrad().end());
  gradIn.append(getExperts().size(), nullptr);
  return success();
}

LogicalResult ScaleOp::buildVjp(OpBuilder &b, ArrayRef<Value> gradOut,
                                SmallVectorImpl<Value> &gradIn) {
  gradIn.push_back(ScaleOp::create(b, getLoc(), gradOut[0], getFactorAttr(), getFqnAttr()));
  return success();
}
