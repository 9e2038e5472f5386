//===- LowerToHloMoe.cpp - The mixture-of-experts kiln ops to hlo ---------===//
//
// lib/Runtime/MoeKernels.cpp's router, grouped experts, load-balancing loss
// and expert-bias update, and their gradients, as XLA instructions.
//
// Top-k is k passes of "largest score, lowest id on ties, then mask it",
// which is the CPU kernel's order and needs no sort.
//
// The experts run dense: every expert over every token of the rank, each
// token's outputs combined by its routing weights (zero for the experts it
// did not select). HLO has static shapes and no ragged GEMM, so the dropless
// grouped form with per-expert row counts (the CPU kernel's, and the NKI
// kernel's that the nki_grouped_experts rule substitutes) has no plain-HLO
// equivalent; the dense form costs experts / top_k times the routed FLOPs and
// [experts, tokens, moe_intermediate] activations. kiln compile reports every
// densely lowered layer. Under expert parallelism the rank's block of
// experts runs over the tokens gathered from its expert group.
//
//===----------------------------------------------------------------------===//

#include "LowerToHlo.h"

#include "kiln/Dialect/Kiln/IR/KilnOps.h"

#include <limits>

using namespace mlir;

namespace kiln {
namespace {

using CmpDir = hlo::ComparisonDirection;

/// `shape` with its last dimension replaced by `last`.
SmallVector<int64_t> withLast(ArrayRef<int64_t> shape, int64_t last) {
  SmallVector<int64_t> out(shape);
  out.back() = last;
  return out;
}

/// The f32 one-hot [..., k, experts] of expert ids [..., k]; with `offset`
/// (expert parallelism: the rank's first expert) over its block of experts,
/// ids of other blocks matching none.
Value expertMask(HloBuilder &b, Value ids, int64_t experts, Value offset = {}) {
  return b.convert(b.oneHot(b.convert(ids, b.i32()), experts, offset), b.f32());
}

/// A per-expert [..., experts] value repeated over the slots of `mask`.
Value overSlots(HloBuilder &b, Value perExpert, Value mask) {
  int64_t rank = HloBuilder::typeOf(mask).getRank();
  SmallVector<int64_t> dims;
  for (int64_t d = 0; d < rank; ++d)
    if (d != rank - 2)
      dims.push_back(d);
  return b.broadcast(perExpert, HloBuilder::shapeOf(mask), dims);
}

/// sum over the k slots of mask * per-slot values [..., k]: [..., experts].
Value sumOverSlots(HloBuilder &b, Value mask, Value perSlot) {
  ArrayRef<int64_t> shape = HloBuilder::shapeOf(mask);
  int64_t rank = int64_t(shape.size());
  Value spread = b.mul(mask, b.broadcastLeading(perSlot, shape));
  return b.sum(spread, {rank - 2});
}

/// Tokens per expert over every row and slot of ids [..., k]: f32 [experts].
Value expertCounts(HloBuilder &b, Value ids, int64_t experts) {
  Value mask = expertMask(b, ids, experts);
  return b.sum(mask, leadingDims(mask));
}

/// x [..., dim] as rows [tokens, dim].
Value asRows(HloBuilder &b, Value x) {
  ArrayRef<int64_t> shape = HloBuilder::shapeOf(x);
  int64_t dim = shape.back();
  return b.reshape(x, {HloBuilder::typeOf(x).getNumElements() / dim, dim});
}

FailureOr<SmallVector<Value>> lower(RouterOp op, RouterOp::Adaptor a, HloBuilder &b,
                                    HloLoweringState &) {
  Value logits = a.getLogits();
  ArrayRef<int64_t> shape = HloBuilder::shapeOf(logits);
  int64_t rank = int64_t(shape.size()), experts = shape.back(), k = int64_t(op.getTopK());
  // Softmax as torch: exponentials of the shifted logits times the
  // reciprocal of their sum.
  Value e = b.exp(b.sub(logits, b.broadcastLeading(b.maxLast(logits), shape)));
  Value sum = b.sumLast(e);
  Value probs = b.mul(e, b.broadcastLeading(b.div(b.splatLike(sum, 1.0), sum), shape));
  Value score = probs;
  if (a.getExpertBias())
    score = b.add(score, b.broadcastLast(a.getExpertBias(), shape));

  Value columns = b.iota(shape, rank - 1, b.i32());
  Value past = b.splatLike(columns, double(experts));
  Value masked = b.splatLike(score, -std::numeric_limits<double>::infinity());
  Value zeros = b.splatLike(probs, 0);
  SmallVector<Value> ids, weights;
  for (int64_t j = 0; j < k; ++j) {
    Value best = b.broadcastLeading(b.maxLast(score), shape);
    Value id = b.reduce(b.select(b.compare(score, best, CmpDir::EQ), columns, past), {rank - 1},
                        hlo::Combiner::min);
    Value chosen = b.compare(columns, b.broadcastLeading(id, shape), CmpDir::EQ);
    ids.push_back(b.reshape(id, withLast(shape, 1)));
    weights.push_back(b.reshape(b.sumLast(b.select(chosen, probs, zeros)), withLast(shape, 1)));
    if (j + 1 < k) // the next pass's candidates: all but those taken
      score = b.select(chosen, masked, score);
  }
  Value w = weights.size() == 1 ? weights[0] : b.concat(weights, rank - 1);
  Value id = ids.size() == 1 ? ids[0] : b.concat(ids, rank - 1);
  if (op.getNormTopkProb())
    w = b.div(w, b.broadcastLeading(b.sumLast(w), HloBuilder::shapeOf(w)));
  return SmallVector<Value>{w, b.convert(id, op.getExperts().getType().getElementType()), probs};
}

FailureOr<SmallVector<Value>> lower(RouterBackwardOp op, RouterBackwardOp::Adaptor a,
                                    HloBuilder &b, HloLoweringState &) {
  Value p = a.getProbs(), dw = a.getWeightsGrad();
  ArrayRef<int64_t> shape = HloBuilder::shapeOf(p);
  Value mask = expertMask(b, a.getExperts(), shape.back()); // [..., k, E]
  Value g = dw;
  if (op.getNormTopkProb()) {
    // w_j = s_j / S: ds_j = (dw_j - sum_i dw_i w_i) / S.
    ArrayRef<int64_t> slots = HloBuilder::shapeOf(dw);
    Value selected = b.sumLast(b.mul(mask, overSlots(b, p, mask)));
    Value total = b.broadcastLeading(b.sumLast(selected), slots);
    Value dwDotW = b.sumLast(b.div(b.mul(dw, selected), total));
    g = b.div(b.sub(dw, b.broadcastLeading(dwDotW, slots)), total);
  }
  Value dp = b.add(a.getProbsGrad(), sumOverSlots(b, mask, g));
  // Softmax VJP: p * (dp - <dp, p>).
  Value dot = b.broadcastLeading(b.sumLast(b.mul(dp, p)), shape);
  return one(b.mul(p, b.sub(dp, dot)));
}

/// The dense experts' recomputable forward on x rows [T, H]: gate and up
/// projections G, U [E, T, I], A = silu(G) * U, and Y = A w2_e^T [E, T, H];
/// with a `round` type (the op's round_to), G, U, A and Y rounded to it, so
/// that every expert dot multiplies narrow values once the converts sink.
struct DenseExperts {
  Value gate, up, act, y;

  static DenseExperts run(HloBuilder &b, Value x, Value w1, Value w3, Value w2, Type round) {
    DenseExperts d;
    // [T, H] . [E, I, H] -> [T, E, I] -> [E, T, I]
    d.gate = b.roundTo(b.transpose(b.dot(x, w1, {}, {}, {1}, {2}), {1, 0, 2}), round);
    d.up = b.roundTo(b.transpose(b.dot(x, w3, {}, {}, {1}, {2}), {1, 0, 2}), round);
    d.act = b.roundTo(swiglu(b, d.gate, d.up), round);
    // [E, T, I] . [E, H, I] -> [E, T, H]
    d.y = b.roundTo(b.dot(d.act, w2, {0}, {0}, {2}, {2}), round);
    return d;
  }
};

/// The op's round_to, or null.
template <typename OpT> Type roundingOf(OpT op) { return op.getRoundTo().value_or(Type()); }

/// Each token's routing weight per expert: [T, E], zero where unselected.
Value combineWeights(HloBuilder &b, Value weights, Value ids, int64_t experts, Value offset) {
  return sumOverSlots(b, expertMask(b, asRows(b, ids), experts, offset), asRows(b, weights));
}

FailureOr<SmallVector<Value>> lower(GroupedExpertsOp op, GroupedExpertsOp::Adaptor a,
                                    HloBuilder &b, HloLoweringState &state) {
  int64_t experts = HloBuilder::shapeOf(a.getW1())[0];
  Value x = asRows(b, a.getInput());
  DenseExperts d = DenseExperts::run(b, x, a.getW1(), a.getW3(), a.getW2(), roundingOf(op));
  Value c = combineWeights(b, a.getWeights(), a.getExperts(), experts,
                           blockOffset(b, state, experts, op.getExpertAxes()));
  // [E, T, H] . [T, E] over E, batched over T -> [T, H]
  Value y = b.dot(d.y, c, {1}, {0}, {0}, {1});
  return one(b.reshape(y, HloBuilder::shapeOf(op.getResult())));
}

FailureOr<SmallVector<Value>> lower(GroupedExpertsBackwardOp op,
                                    GroupedExpertsBackwardOp::Adaptor a, HloBuilder &b,
                                    HloLoweringState &state) {
  Value w1 = a.getW1(), w3 = a.getW3(), w2 = a.getW2();
  int64_t experts = HloBuilder::shapeOf(w1)[0];
  Value x = asRows(b, a.getInput()), dy = asRows(b, a.getResultGrad());
  ArrayRef<int64_t> rows = HloBuilder::shapeOf(x);
  Value mask = expertMask(b, asRows(b, a.getExperts()), experts,
                          blockOffset(b, state, experts, op.getExpertAxes())); // [T, k, E]
  Value c = sumOverSlots(b, mask, asRows(b, a.getWeights()));      // [T, E]
  Type round = roundingOf(op);
  DenseExperts d = DenseExperts::run(b, x, w1, w3, w2, round);

  // d weights[t, j] = dy[t] . Y of token t's j-th expert.
  Value perExpert = b.dot(d.y, dy, {1}, {0}, {2}, {1}); // [T, E]
  Value dWeights = b.sumLast(b.mul(mask, overSlots(b, perExpert, mask)));
  // dY [E, T, H] = c[t, e] dy[t]: zero for the experts a token skipped, so
  // they get zero weight gradients.
  SmallVector<int64_t> etH{experts, rows[0], rows[1]};
  // Rounded, with dA, dG and dU, as the CPU kernel rounds them.
  Value dY = b.roundTo(b.mul(b.broadcast(c, etH, {1, 0}), b.broadcast(dy, etH, {1, 2})), round);
  Value dAct = b.roundTo(b.dot(dY, w2, {0}, {0}, {2}, {1}), round); // [E, T, I]
  Value dW2 = b.dot(dY, d.act, {0}, {0}, {1}, {1});                 // [E, H, I]
  auto [dGateWide, dUpWide] = swigluGrads(b, dAct, d.gate, d.up);
  Value dGate = b.roundTo(dGateWide, round), dUp = b.roundTo(dUpWide, round);
  Value dW1 = b.dot(dGate, x, {}, {}, {1}, {0});       // [E, I, H]
  Value dW3 = b.dot(dUp, x, {}, {}, {1}, {0});
  // dx = sum_e dG_e w1_e + dU_e w3_e: [E, T, I] . [E, I, H] over E and I.
  Value dx = b.add(b.dot(dGate, w1, {}, {}, {0, 2}, {0, 1}), b.dot(dUp, w3, {}, {}, {0, 2}, {0, 1}));
  return SmallVector<Value>{b.reshape(dx, HloBuilder::shapeOf(op.getInputGrad())),
                            b.reshape(dWeights, HloBuilder::shapeOf(op.getWeightsGrad())), dW1,
                            dW3, dW2};
}

/// The rows (tokens) of every layer's ids together: N.
int64_t totalRows(ValueRange ids) {
  int64_t n = 0;
  for (Value v : ids)
    n += HloBuilder::typeOf(v).getNumElements() / HloBuilder::shapeOf(v).back();
  return n;
}

/// count_e over every layer's ids: f32 [experts].
Value countsOverLayers(HloBuilder &b, ValueRange ids, int64_t experts) {
  Value counts;
  for (Value v : ids) {
    Value c = expertCounts(b, v, experts);
    counts = counts ? b.add(counts, c) : c;
  }
  return counts;
}

FailureOr<SmallVector<Value>> lower(LoadBalancingLossOp, LoadBalancingLossOp::Adaptor a,
                                    HloBuilder &b, HloLoweringState &) {
  int64_t experts = HloBuilder::shapeOf(a.getProbs().front()).back();
  double n = double(totalRows(a.getExperts()));
  Value probSum;
  for (Value p : a.getProbs()) {
    Value rows = b.sum(p, leadingDims(p));
    probSum = probSum ? b.add(probSum, rows) : rows;
  }
  Value counts = countsOverLayers(b, a.getExperts(), experts);
  // experts * sum_e (count_e / N) (probsum_e / N)
  return one(b.mulScalar(b.sumAll(b.mul(counts, probSum)), double(experts) / (n * n)));
}

FailureOr<SmallVector<Value>> lower(LoadBalancingLossBackwardOp op,
                                    LoadBalancingLossBackwardOp::Adaptor a, HloBuilder &b,
                                    HloLoweringState &) {
  int64_t experts = int64_t(op.getNumExperts());
  double n = double(totalRows(a.getExperts()));
  // Every row's gradient: loss_grad * experts * count_e / N^2.
  Value counts = countsOverLayers(b, a.getExperts(), experts);
  Value rowGrad = b.mul(b.mulScalar(counts, double(experts) / (n * n)),
                        b.broadcast(a.getLossGrad(), {experts}, {}));
  SmallVector<Value> grads;
  for (Value g : op.getProbsGrad()) {
    ArrayRef<int64_t> shape = HloBuilder::shapeOf(g);
    grads.push_back(b.broadcastLast(rowGrad, shape));
  }
  return grads;
}

FailureOr<SmallVector<Value>> lower(ExpertBiasUpdateOp op, ExpertBiasUpdateOp::Adaptor a,
                                    HloBuilder &b, HloLoweringState &) {
  Value bias = a.getExpertBias();
  int64_t experts = HloBuilder::shapeOf(bias)[0];
  Value tokens;
  for (Value ids : a.getExperts()) {
    Value counts = expertCounts(b, ids, experts);
    tokens = tokens ? b.add(tokens, counts) : counts;
  }
  auto meanOf = [&](Value v) {
    return b.broadcast(b.mulScalar(b.sumAll(v), 1.0 / double(experts)), {experts}, {});
  };
  // torchtitan: coeff * sign(mean - tokens), centred.
  Value delta = b.mulScalar(b.sign(b.sub(meanOf(tokens), tokens)), op.getCoeff().convertToDouble());
  return one(b.add(bias, b.sub(delta, meanOf(delta))));
}

FailureOr<SmallVector<Value>> lower(ScaleOp op, ScaleOp::Adaptor a, HloBuilder &b,
                                    HloLoweringState &) {
  return one(b.mulScalar(a.getInput(), op.getFactor().convertToDouble()));
}

} // namespace

void populateMoeToHlo(RewritePatternSet &patterns, HloLoweringState &state) {
  addHloLowering<RouterOp>(patterns, state, lower);
  addHloLowering<RouterBackwardOp>(patterns, state, lower);
  addHloLowering<GroupedExpertsOp>(patterns, state, lower);
  addHloLowering<GroupedExpertsBackwardOp>(patterns, state, lower);
  addHloLowering<LoadBalancingLossOp>(patterns, state, lower);
  addHloLowering<LoadBalancingLossBackwardOp>(patterns, state, lower);
  addHloLowering<ExpertBiasUpdateOp>(patterns, state, lower);
  addHloLowering<ScaleOp>(patterns, state, lower);
}

} // namespace kiln
