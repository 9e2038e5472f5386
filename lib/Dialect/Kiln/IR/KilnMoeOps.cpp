//===- KilnMoeOps.cpp - Shape rules and costs of the MoE ops --------------===//
//
// kiln.router, kiln.grouped_experts, kiln.load_balancing_loss, kiln.scale
// and their backward ops. Their VJPs are in KilnVjp.cpp and their sharding
// rules in KilnShardingRules.cpp, with every other op's.
//
//===----------------------------------------------------------------------===//

#include "ShapeRules.h"

using namespace mlir;
using namespace kiln;
using namespace kiln::detail;

namespace {

/// router / router_backward: probs-like [..., E] and the ids [..., k] share
/// their leading shape, with 1 <= k <= E.
template <typename OpT>
LogicalResult checkRouting(std::optional<Location> loc, StringRef fqn, StringRef name,
                           RankedTensorType byExpert, RankedTensorType ids) {
  if (ids.getShape().drop_back() != byExpert.getShape().drop_back())
    return shapeError<OpT>(loc, fqn, "experts ", ids, " must have the leading shape of ",
                           name, " ", byExpert);
  int64_t k = ids.getShape().back(), experts = byExpert.getShape().back();
  if (k < 1 || k > experts)
    return shapeError<OpT>(loc, fqn, "top_k must be in [1, ", experts, "] (the experts), got ",
                           k);
  return success();
}

/// grouped_experts and its backward: x [..., H], weights/experts [..., k],
/// w1 = w3 [E, I, H], w2 [E, H, I].
template <typename OpT, typename AdaptorT>
LogicalResult checkExperts(std::optional<Location> loc, AdaptorT adaptor) {
  StringRef fqn = adaptor.getFqn();
  if (failed(checkOperands<OpT>(loc, fqn,
                                {{"input", adaptor.getInput(), -1, Elt::Float},
                                 {"weights", adaptor.getWeights(), -1, Elt::F32},
                                 {"experts", adaptor.getExperts(), -1, Elt::Id},
                                 {"w1", adaptor.getW1(), 3, Elt::Float},
                                 {"w3", adaptor.getW3(), 3, Elt::Float},
                                 {"w2", adaptor.getW2(), 3, Elt::Float}})))
    return failure();
  auto x = rankedType(adaptor.getInput()), weights = rankedType(adaptor.getWeights()),
       ids = rankedType(adaptor.getExperts()), w1 = rankedType(adaptor.getW1()),
       w3 = rankedType(adaptor.getW3()), w2 = rankedType(adaptor.getW2());
  if (weights.getShape() != ids.getShape())
    return shapeError<OpT>(loc, fqn, "weights ", weights, " and experts ", ids,
                           " must have the same shape");
  if (ids.getShape().drop_back() != x.getShape().drop_back())
    return shapeError<OpT>(loc, fqn, "experts ", ids, " must have the leading shape of input ",
                           x);
  int64_t e = w1.getDimSize(0), inter = w1.getDimSize(1), hidden = x.getShape().back();
  if (w1.getDimSize(2) != hidden)
    return shapeError<OpT>(loc, fqn, "w1 ", w1, " must be [experts, inter, hidden] with hidden ",
                           hidden, " (the last dimension of input ", x, ")");
  if (w3.getShape() != w1.getShape())
    return shapeError<OpT>(loc, fqn, "w3 ", w3, " must have w1's shape ", w1);
  if (w2.getDimSize(0) != e || w2.getDimSize(1) != hidden || w2.getDimSize(2) != inter)
    return shapeError<OpT>(loc, fqn, "w2 ", w2, " must be [experts, hidden, inter] = [", e, ", ",
                           hidden, ", ", inter, "]");
  // A blocked input's first dimension indexes blocks of the stacks' experts.
  if (adaptor.getBlocked() && (x.getRank() < 2 || e % x.getDimSize(0)))
    return shapeError<OpT>(loc, fqn, "a blocked input ", x,
                           " must be [blocks, ..., hidden] with blocks dividing the ", e,
                           " experts of the stacks");
  // Under expert parallelism the stacks are a block of num_experts.
  if (auto total = adaptor.getNumExperts())
    e = std::max<int64_t>(e, int64_t(*total));
  if (ids.getShape().back() < 1 || ids.getShape().back() > e)
    return shapeError<OpT>(loc, fqn, "k = ", ids.getShape().back(),
                           " experts per token must be in [1, ", e, "] (the experts)");
  return success();
}


} // namespace

/// Three GEMMs, silu * up, and the weighted sum into the token's output, per
/// (token, expert) pair.
double kiln::expertFlops(double rows, int64_t hidden, int64_t inter) {
  return rows * (6.0 * hidden * inter + 5.0 * inter + 2.0 * hidden);
}

//===----------------------------------------------------------------------===//
// RouterOp
//===----------------------------------------------------------------------===//

LogicalResult RouterOp::inferReturnTypes(MLIRContext *context, std::optional<Location> loc,
                                         Adaptor adaptor, SmallVectorImpl<Type> &types) {
  StringRef fqn = adaptor.getFqn();
  if (failed(checkOperands<RouterOp>(loc, fqn, {{"logits", adaptor.getLogits(), -1, Elt::F32}})))
    return failure();
  auto logits = rankedType(adaptor.getLogits());
  int64_t k = int64_t(adaptor.getTopK()), experts = logits.getShape().back();
  if (k < 1 || k > experts)
    return shapeError<RouterOp>(loc, fqn, "top_k must be in [1, ", experts,
                                "] (the experts), got ", k);
  if (Value bias = adaptor.getExpertBias()) {
    auto type = rankedType(bias);
    if (!type || type.getRank() != 1 || type.getDimSize(0) != experts ||
        !type.getElementType().isF32())
      return shapeError<RouterOp>(loc, fqn, "expert_bias ", bias.getType(), " must be [",
                                  experts, "] f32, one per expert");
  }
  SmallVector<int64_t> topShape = withLast(logits.getShape(), k);
  types.push_back(withShape(logits, topShape));
  types.push_back(RankedTensorType::get(topShape, IntegerType::get(context, 64)));
  types.push_back(logits);
  return success();
}

// exp, sum and divide per logit, then k passes of selection.
double RouterOp::getFlops() {
  auto logits = getLogits().getType();
  return double(logits.getNumElements()) * (3.0 + getTopK());
}

//===----------------------------------------------------------------------===//
// GroupedExpertsOp
//===----------------------------------------------------------------------===//

LogicalResult GroupedExpertsOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                                 Adaptor adaptor,
                                                 SmallVectorImpl<Type> &types) {
  if (failed(checkExperts<GroupedExpertsOp>(loc, adaptor)))
    return failure();
  types.push_back(adaptor.getInput().getType());
  return success();
}

/// The expert-parallel attributes of a grouped experts op (forward or
/// backward).
template <typename OpT> static LogicalResult verifyExpertShard(OpT op) {
  std::optional<int64_t> total;
  if (auto n = op.getNumExperts())
    total = int64_t(*n);
  return verifyExpertBlock(op, op.getExpertAxes(), total, op.getW1().getType().getDimSize(0),
                           [&] { return op.emitOpError() << "(fqn '" << op.getFqn() << "'): "; });
}

/// The share of routed pairs a rank's experts take at a balanced load. A
/// blocked input holds only the rank's own pairs, and its capacity is what
/// a static-shape kernel computes: every row counts.
template <typename OpT> static double localPairs(OpT op) {
  double pairs = double(op.getExperts().getType().getNumElements());
  if (auto total = op.getNumExperts(); total && !op.getBlocked())
    return pairs * double(op.getW1().getType().getDimSize(0)) / double(*total);
  return pairs;
}

LogicalResult GroupedExpertsOp::verify() { return verifyExpertShard(*this); }
LogicalResult GroupedExpertsBackwardOp::verify() { return verifyExpertShard(*this); }

double GroupedExpertsOp::getRoutedPairs() { return localPairs(*this); }

double GroupedExpertsOp::getFlops() {
  auto w1 = getW1().getType();
  return expertFlops(getRoutedPairs(), w1.getDimSize(2), w1.getDimSize(1));
}

double GroupedExpertsOp::getPeakGroupFlops() {
  auto w1 = getW1().getType();
  return expertFlops(leadingElements(getInput().getType()), w1.getDimSize(2), w1.getDimSize(1));
}

//===----------------------------------------------------------------------===//
// LoadBalancingLossOp
//===----------------------------------------------------------------------===//

LogicalResult LoadBalancingLossOp::inferReturnTypes(MLIRContext *context,
                                                    std::optional<Location> loc,
                                                    Adaptor adaptor,
                                                    SmallVectorImpl<Type> &types) {
  StringRef fqn = adaptor.getFqn();
  ValueRange probs = adaptor.getProbs(), experts = adaptor.getExperts();
  // The two groups split the operands evenly: an odd count would drop one.
  if (probs.empty() || adaptor.getOperands().size() != 2 * probs.size())
    return shapeError<LoadBalancingLossOp>(loc, fqn,
                                           "needs one probs and one experts operand per "
                                           "sparse layer, got ",
                                           probs.size(), " and ",
                                           adaptor.getOperands().size() - probs.size());
  int64_t numExperts = -1;
  for (auto [p, ids] : llvm::zip(probs, experts)) {
    if (failed(checkOperands<LoadBalancingLossOp>(
            loc, fqn, {{"probs", p, -1, Elt::F32}, {"experts", ids, -1, Elt::Id}})) ||
        failed(checkRouting<LoadBalancingLossOp>(loc, fqn, "probs", rankedType(p),
                                                 rankedType(ids))))
      return failure();
    int64_t e = rankedType(p).getShape().back();
    if (numExperts >= 0 && e != numExperts)
      return shapeError<LoadBalancingLossOp>(loc, fqn, "every layer must route over the same ",
                                             numExperts, " experts, got ", p.getType());
    numExperts = e;
  }
  types.push_back(RankedTensorType::get({}, Float32Type::get(context)));
  return success();
}

double LoadBalancingLossOp::getFlops() {
  double flops = 0;
  for (Value p : getProbs())
    flops += cast<RankedTensorType>(p.getType()).getNumElements();
  for (Value ids : getExperts())
    flops += cast<RankedTensorType>(ids.getType()).getNumElements();
  return flops;
}

//===----------------------------------------------------------------------===//
// ExpertBiasUpdateOp
//===----------------------------------------------------------------------===//

LogicalResult ExpertBiasUpdateOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                                   Adaptor adaptor,
                                                   SmallVectorImpl<Type> &types) {
  StringRef fqn = adaptor.getFqn();
  if (failed(checkOperands<ExpertBiasUpdateOp>(
          loc, fqn, {{"expert_bias", adaptor.getExpertBias(), 1, Elt::F32}})))
    return failure();
  if (adaptor.getExperts().empty())
    return shapeError<ExpertBiasUpdateOp>(loc, fqn, "needs at least one experts operand");
  int64_t experts = rankedType(adaptor.getExpertBias()).getDimSize(0);
  for (Value ids : adaptor.getExperts()) {
    if (failed(checkOperands<ExpertBiasUpdateOp>(loc, fqn, {{"experts", ids, -1, Elt::Id}})))
      return failure();
    int64_t k = rankedType(ids).getShape().back();
    if (k < 1 || k > experts)
      return shapeError<ExpertBiasUpdateOp>(loc, fqn, "experts selects k = ", k,
                                            " per token, not in [1, ", experts, "]");
  }
  if (!(adaptor.getCoeff().convertToDouble() > 0))
    return shapeError<ExpertBiasUpdateOp>(loc, fqn, "coeff must be positive");
  types.push_back(adaptor.getExpertBias().getType());
  return success();
}

double ExpertBiasUpdateOp::getFlops() {
  double flops = 4.0 * getExpertBias().getType().getNumElements();
  for (Value ids : getExperts())
    flops += double(cast<RankedTensorType>(ids.getType()).getNumElements());
  return flops;
}
std::optional<unsigned> ExpertBiasUpdateOp::getTiedOperand(unsigned) { return 0; }

//===----------------------------------------------------------------------===//
// ScaleOp
//===----------------------------------------------------------------------===//

double ScaleOp::getFlops() { return double(getInput().getType().getNumElements()); }

//===----------------------------------------------------------------------===//
// RouterBackwardOp
//===----------------------------------------------------------------------===//

LogicalResult RouterBackwardOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                                 Adaptor adaptor,
                                                 SmallVectorImpl<Type> &types) {
  StringRef fqn = adaptor.getFqn();
  if (failed(checkOperands<RouterBackwardOp>(
          loc, fqn, {{"probs", adaptor.getProbs(), -1, Elt::F32},
                     {"experts", adaptor.getExperts(), -1, Elt::I64},
                     {"weights_grad", adaptor.getWeightsGrad(), -1, Elt::F32},
                     {"probs_grad", adaptor.getProbsGrad(), -1, Elt::F32}})))
    return failure();
  auto probs = rankedType(adaptor.getProbs()), ids = rankedType(adaptor.getExperts());
  if (failed(checkRouting<RouterBackwardOp>(loc, fqn, "probs", probs, ids)))
    return failure();
  if (adaptor.getWeightsGrad().getType() != RankedTensorType::get(ids.getShape(),
                                                                  probs.getElementType()))
    return shapeError<RouterBackwardOp>(loc, fqn, "weights_grad ",
                                        adaptor.getWeightsGrad().getType(),
                                        " must have the shape of experts ", ids);
  if (adaptor.getProbsGrad().getType() != probs)
    return shapeError<RouterBackwardOp>(loc, fqn, "probs_grad ",
                                        adaptor.getProbsGrad().getType(),
                                        " must have the type of probs ", probs);
  types.push_back(probs);
  return success();
}

double RouterBackwardOp::getFlops() { return 4.0 * getProbs().getType().getNumElements(); }

//===----------------------------------------------------------------------===//
// GroupedExpertsBackwardOp
//===----------------------------------------------------------------------===//

LogicalResult GroupedExpertsBackwardOp::inferReturnTypes(MLIRContext *,
                                                         std::optional<Location> loc,
                                                         Adaptor adaptor,
                                                         SmallVectorImpl<Type> &types) {
  if (failed(checkExperts<GroupedExpertsBackwardOp>(loc, adaptor)))
    return failure();
  SmallVector<Type> forward;
  if (failed(inferSameType<GroupedExpertsBackwardOp>(loc, adaptor.getFqn(), "result_grad",
                                                     adaptor.getResultGrad(), "input",
                                                     adaptor.getInput(), forward)))
    return failure();
  types.append({adaptor.getInput().getType(), adaptor.getWeights().getType(),
                adaptor.getW1().getType(), adaptor.getW3().getType(),
                adaptor.getW2().getType()});
  return success();
}

// The recomputed forward GEMMs (2 of 3) and the backward's six.
double GroupedExpertsBackwardOp::getFlops() {
  auto w1 = getW1().getType();
  return expertFlops(localPairs(*this), w1.getDimSize(2), w1.getDimSize(1)) * 8 / 3;
}

//===----------------------------------------------------------------------===//
// LoadBalancingLossBackwardOp
//===----------------------------------------------------------------------===//

LogicalResult LoadBalancingLossBackwardOp::inferReturnTypes(MLIRContext *context,
                                                            std::optional<Location> loc,
                                                            Adaptor adaptor,
                                                            SmallVectorImpl<Type> &types) {
  StringRef fqn = adaptor.getFqn();
  int64_t numExperts = int64_t(adaptor.getNumExperts());
  if (adaptor.getExperts().empty())
    return shapeError<LoadBalancingLossBackwardOp>(loc, fqn, "needs the experts of at least "
                                                             "one sparse layer");
  for (Value ids : adaptor.getExperts()) {
    if (failed(checkOperands<LoadBalancingLossBackwardOp>(loc, fqn,
                                                          {{"experts", ids, -1, Elt::Id}})))
      return failure();
    auto type = rankedType(ids);
    if (type.getShape().back() > numExperts || numExperts < 1)
      return shapeError<LoadBalancingLossBackwardOp>(loc, fqn, "num_experts ", numExperts,
                                                     " must be at least k = ",
                                                     type.getShape().back());
    types.push_back(RankedTensorType::get(withLast(type.getShape(), numExperts),
                                          Float32Type::get(context)));
  }
  return success();
}

double LoadBalancingLossBackwardOp::getFlops() {
  double flops = 0;
  for (Type t : getResultTypes())
    flops += cast<RankedTensorType>(t).getNumElements();
  return flops;
}
