//===- LowerToHloBackward.cpp - Backward kiln ops to hlo ------------------===//
//
// The gradients of lib/Runtime/BackwardKernels.cpp as XLA instructions.
//
//===----------------------------------------------------------------------===//

#include "LowerToHlo.h"

#include "kiln/Dialect/Kiln/IR/KilnOps.h"

using namespace mlir;

namespace kiln {

SmallVector<int64_t> leadingDims(Value v) {
  SmallVector<int64_t> dims;
  for (int64_t d = 0; d + 1 < HloBuilder::typeOf(v).getRank(); ++d)
    dims.push_back(d);
  return dims;
}

namespace {

FailureOr<SmallVector<Value>> lower(EmbeddingBackwardOp op, EmbeddingBackwardOp::Adaptor a,
                                    HloBuilder &b, HloLoweringState &state) {
  Value grad = a.getGrad();
  int64_t rows = op.getVocabSize(), dim = HloBuilder::shapeOf(grad).back();
  VocabIds ids = localVocabIds(b, state, a.getIds(), rows, op.getVocabAxes());
  if (ids.inside)
    grad = b.select(b.broadcastLeading(ids.inside, HloBuilder::shapeOf(grad)), grad,
                    b.splatLike(grad, 0));
  Value zeros = b.splat(b.tensor({rows, dim}, HloBuilder::typeOf(grad).getElementType()), 0);
  return one(b.scatterAddRows(zeros, ids.ids, grad));
}

FailureOr<SmallVector<Value>> lower(RmsNormBackwardOp op, RmsNormBackwardOp::Adaptor a,
                                    HloBuilder &b, HloLoweringState &) {
  Value dy = a.getGrad(), x = a.getInput();
  ArrayRef<int64_t> shape = HloBuilder::shapeOf(x);
  int64_t dim = shape.back();
  Value inv = rmsInverse(b, x, op.getEps().convertToDouble());
  Value w = b.broadcastLast(a.getWeight(), shape);
  // dx = inv dy w - inv^3 (sum_j dy_j w_j x_j) / dim x
  Value dot = b.sumLast(b.mul(b.mul(dy, w), x));
  Value coef = b.mulScalar(b.mul(b.mul(b.mul(inv, inv), inv), dot), 1.0 / double(dim));
  Value invB = b.broadcastLeading(inv, shape);
  Value dx = b.sub(b.mul(b.mul(invB, dy), w), b.mul(b.broadcastLeading(coef, shape), x));
  Value dw = b.sum(b.mul(b.mul(dy, x), invB), leadingDims(x));
  return SmallVector<Value>{dx, dw};
}

FailureOr<SmallVector<Value>> lower(LinearBackwardDataOp, LinearBackwardDataOp::Adaptor a,
                                    HloBuilder &b, HloLoweringState &) {
  int64_t last = HloBuilder::typeOf(a.getGrad()).getRank() - 1;
  return one(b.dot(a.getGrad(), a.getWeight(), {}, {}, {last}, {0}));
}

FailureOr<SmallVector<Value>> lower(LinearBackwardWeightOp, LinearBackwardWeightOp::Adaptor a,
                                    HloBuilder &b, HloLoweringState &) {
  SmallVector<int64_t> rows = leadingDims(a.getGrad());
  return one(b.dot(a.getGrad(), a.getInput(), {}, {}, rows, rows));
}

FailureOr<SmallVector<Value>> lower(RopeBackwardOp, RopeBackwardOp::Adaptor a, HloBuilder &b,
                                    HloLoweringState &) {
  return SmallVector<Value>{rotate(b, a.getQGrad(), a.getCache(), true),
                            rotate(b, a.getKGrad(), a.getCache(), true)};
}

FailureOr<SmallVector<Value>> lower(AttentionBackwardOp op, AttentionBackwardOp::Adaptor a,
                                    HloBuilder &b, HloLoweringState &state) {
  AttentionLayout l = AttentionLayout::of(a.getQ(), a.getK());
  double scale = op.getScale().convertToDouble();
  Value q = l.toGroups(b, a.getQ()), dout = l.toGroups(b, a.getOutGrad()),
        out = l.toGroups(b, a.getOut());
  Value scores = l.scores(b, q, a.getK(), scale);
  ArrayRef<int64_t> shape = HloBuilder::shapeOf(scores);
  // The probabilities again, from the saved log-sum-exp.
  Value lse = b.reshape(a.getLse(), {l.batch, l.kvHeads, l.group, l.seq});
  Value p = b.exp(b.sub(scores, b.broadcastLeading(lse, shape)));
  if (op.getCausal())
    p = b.select(causalMask(b, state, shape, op.getQueryAxes(),
                            SequenceLayout::ofChunks(op.getHeadTailChunks())),
                 p, b.splatLike(p, 0));
  // dV = P^T dO summed over the group: [b, kv, s_k, d] -> [b, s, kv, d]
  Value dv = b.transpose(b.dot(p, dout, {0, 1}, {0, 1}, {2, 3}, {2, 3}), {0, 2, 1, 3});
  // dS = P (dP - rowsum(dO O)), dP = dO V^T
  Value dp = b.dot(dout, a.getV(), {0, 1}, {0, 2}, {4}, {3});
  Value rowDot = b.sumLast(b.mul(dout, out));
  Value ds = b.mul(p, b.sub(dp, b.broadcastLeading(rowDot, shape)));
  Value dq = l.fromGroups(b, b.mulScalar(b.dot(ds, a.getK(), {0, 1}, {0, 2}, {4}, {1}), scale));
  Value dk = b.transpose(b.mulScalar(b.dot(ds, q, {0, 1}, {0, 1}, {2, 3}, {2, 3}), scale),
                         {0, 2, 1, 3});
  return SmallVector<Value>{dq, dk, dv};
}

FailureOr<SmallVector<Value>> lower(SwigluBackwardOp, SwigluBackwardOp::Adaptor a,
                                    HloBuilder &b, HloLoweringState &) {
  auto [dg, du] = swigluGrads(b, a.getOutGrad(), a.getGate(), a.getUp());
  return SmallVector<Value>{dg, du};
}

} // namespace

std::pair<Value, Value> swigluGrads(HloBuilder &b, Value dy, Value g, Value u) {
  Value sig = b.div(b.splatLike(g, 1.0), b.addScalar(b.exp(b.neg(g)), 1.0));
  Value du = b.mul(b.mul(dy, g), sig);
  // silu'(g) = sig (1 + g (1 - sig))
  Value oneMinusSig = b.sub(b.splatLike(sig, 1.0), sig);
  Value dsilu = b.mul(sig, b.addScalar(b.mul(g, oneMinusSig), 1.0));
  return {b.mul(b.mul(dy, u), dsilu), du};
}

void populateBackwardToHlo(RewritePatternSet &patterns, HloLoweringState &state) {
  addHloLowering<EmbeddingBackwardOp>(patterns, state, lower);
  addHloLowering<RmsNormBackwardOp>(patterns, state, lower);
  addHloLowering<LinearBackwardDataOp>(patterns, state, lower);
  addHloLowering<LinearBackwardWeightOp>(patterns, state, lower);
  addHloLowering<RopeBackwardOp>(patterns, state, lower);
  addHloLowering<AttentionBackwardOp>(patterns, state, lower);
  addHloLowering<SwigluBackwardOp>(patterns, state, lower);
}

} // namespace kiln
