//===- LowerToHloOptimizer.cpp - Loss and optimizer kiln ops to hlo -------===//
//
// Cross-entropy (whole or on vocabulary shards), the gradient norm,
// clipping, the LR schedule and AdamW, as lib/Runtime computes them
// (BackwardKernels.cpp, LossParallel.cpp, LrSchedule.cpp), in float32.
//
//===----------------------------------------------------------------------===//

#include "LowerToHlo.h"

#include "kiln/Dialect/Kiln/IR/KilnOps.h"

#include <cmath>

using namespace mlir;

namespace kiln {
namespace {

using CmpDir = hlo::ComparisonDirection;

int64_t positionsOf(Value labelsOrRows, std::optional<uint64_t> total) {
  return total ? int64_t(*total) : HloBuilder::typeOf(labelsOrRows).getNumElements();
}

/// The f32 scalar `lossGrad / positions`.
Value gradFactor(HloBuilder &b, Value lossGrad, int64_t positions) {
  return b.mulScalar(lossGrad, 1.0 / double(positions));
}

/// logits - max over each row, broadcast back.
Value shifted(HloBuilder &b, Value logits, Value rowMax) {
  return b.sub(logits, b.broadcastLeading(rowMax, HloBuilder::shapeOf(logits)));
}

/// The label's entry of each row, 0 where the (shifted) one-hot is empty.
Value pick(HloBuilder &b, Value logits, Value hot) {
  return b.sumLast(b.select(hot, logits, b.splatLike(logits, 0)));
}

FailureOr<SmallVector<Value>> lower(CrossEntropyOp op, CrossEntropyOp::Adaptor a, HloBuilder &b,
                                    HloLoweringState &) {
  Value logits = a.getLogits();
  int64_t vocab = HloBuilder::shapeOf(logits).back();
  Value mx = b.maxLast(logits);
  Value lse = b.add(mx, b.log(b.sumLast(b.exp(shifted(b, logits, mx)))));
  Value target = pick(b, logits, b.oneHot(b.convert(a.getLabels(), b.i32()), vocab));
  Value total = b.sumAll(b.sub(lse, target));
  return one(b.mulScalar(total, 1.0 / double(positionsOf(a.getLabels(),
                                                        op.getTotalPositions()))));
}

FailureOr<SmallVector<Value>> lower(CrossEntropyBackwardOp op,
                                    CrossEntropyBackwardOp::Adaptor a, HloBuilder &b,
                                    HloLoweringState &) {
  Value logits = a.getLogits();
  ArrayRef<int64_t> shape = HloBuilder::shapeOf(logits);
  Value e = b.exp(shifted(b, logits, b.maxLast(logits)));
  Value softmax = b.div(e, b.broadcastLeading(b.sumLast(e), shape));
  Value hot = b.convert(b.oneHot(b.convert(a.getLabels(), b.i32()), shape.back()),
                        HloBuilder::typeOf(logits).getElementType());
  Value factor = gradFactor(b, a.getLossGrad(), positionsOf(a.getLabels(),
                                                            op.getTotalPositions()));
  return one(b.mul(b.sub(softmax, hot), b.broadcast(factor, shape, {})));
}

FailureOr<SmallVector<Value>> lower(VocabParallelMaxOp, VocabParallelMaxOp::Adaptor a,
                                    HloBuilder &b, HloLoweringState &) {
  return one(b.convert(b.maxLast(a.getLogits()), b.f32()));
}

FailureOr<SmallVector<Value>> lower(VocabParallelStatsOp op, VocabParallelStatsOp::Adaptor a,
                                    HloBuilder &b, HloLoweringState &state) {
  Value logits = a.getLogits();
  int64_t vocab = HloBuilder::shapeOf(logits).back();
  Value sumExp = b.sumLast(b.exp(shifted(b, logits, a.getMax())));
  Value offset = blockOffset(b, state, vocab, op.getVocabAxes());
  Value target = pick(b, logits, b.oneHot(b.convert(a.getLabels(), b.i32()), vocab, offset));
  SmallVector<int64_t> column(HloBuilder::shapeOf(sumExp));
  column.push_back(1);
  return one(b.concat({b.reshape(sumExp, column), b.reshape(target, column)},
                      int64_t(column.size()) - 1));
}

/// stats[..., i] as [...].
Value statColumn(HloBuilder &b, Value stats, int64_t i) {
  ArrayRef<int64_t> shape = HloBuilder::shapeOf(stats);
  int64_t last = int64_t(shape.size()) - 1;
  return b.reshape(b.slice(stats, last, i, i + 1), shape.drop_back());
}

FailureOr<SmallVector<Value>> lower(VocabParallelLossOp op, VocabParallelLossOp::Adaptor a,
                                    HloBuilder &b, HloLoweringState &) {
  Value rows = b.sub(b.add(a.getMax(), b.log(statColumn(b, a.getStats(), 0))),
                     statColumn(b, a.getStats(), 1));
  return one(b.mulScalar(b.sumAll(rows),
                         1.0 / double(positionsOf(a.getMax(), op.getTotalPositions()))));
}

FailureOr<SmallVector<Value>> lower(VocabParallelLossBackwardOp op,
                                    VocabParallelLossBackwardOp::Adaptor a, HloBuilder &b,
                                    HloLoweringState &state) {
  Value logits = a.getLogits();
  ArrayRef<int64_t> shape = HloBuilder::shapeOf(logits);
  Value factor = gradFactor(b, a.getLossGrad(), positionsOf(a.getLabels(),
                                                            op.getTotalPositions()));
  Value rowScale = b.div(b.broadcast(factor, HloBuilder::shapeOf(a.getMax()), {}),
                         statColumn(b, a.getStats(), 0));
  Value probs = b.mul(b.exp(shifted(b, logits, a.getMax())), b.broadcastLeading(rowScale, shape));
  Value offset = blockOffset(b, state, shape.back(), op.getVocabAxes());
  Value hot = b.convert(b.oneHot(b.convert(a.getLabels(), b.i32()), shape.back(), offset),
                        HloBuilder::typeOf(logits).getElementType());
  return one(b.sub(probs, b.mul(hot, b.broadcast(factor, shape, {}))));
}

FailureOr<SmallVector<Value>> lower(GlobalNormOp op, GlobalNormOp::Adaptor a, HloBuilder &b,
                                    HloLoweringState &) {
  Value total = b.scalar(b.f32(), 0);
  for (Value t : a.getTensors()) {
    Value t32 = b.convert(t, b.f32());
    total = b.add(total, b.sumAll(b.mul(t32, t32)));
  }
  return one(op.getSquared() ? total : b.sqrt(total));
}

FailureOr<SmallVector<Value>> lower(SqrtOp, SqrtOp::Adaptor a, HloBuilder &b,
                                    HloLoweringState &) {
  return one(b.sqrt(a.getInput()));
}

FailureOr<SmallVector<Value>> lower(ClipCoefOp op, ClipCoefOp::Adaptor a, HloBuilder &b,
                                    HloLoweringState &) {
  // torch.nn.utils.clip_grad_norm_: min(1, max_norm / (norm + 1e-6))
  Value norm = a.getNorm();
  Value coef = b.div(b.splatLike(norm, op.getMaxNorm().convertToDouble()), b.addScalar(norm, 1e-6));
  return one(b.min(coef, b.splatLike(norm, 1.0)));
}

FailureOr<SmallVector<Value>> lower(LrScheduleOp op, LrScheduleOp::Adaptor a, HloBuilder &b,
                                    HloLoweringState &) {
  double warmup = double(op.getWarmupSteps()), stable = double(op.getStableSteps()),
         decay = double(op.getDecaySteps()), floor = op.getMinLrFactor().convertToDouble();
  Value k = b.convert(a.getStep(), b.f32());
  Value factor = b.splatLike(k, 1.0);
  if (decay > 0) {
    Value progress = b.mulScalar(b.addScalar(k, 1.0 - warmup - stable), 1.0 / decay);
    Value f;
    switch (op.getDecayType()) {
    case DecayType::Sqrt:
      f = b.sub(b.splatLike(k, 1.0), b.sqrt(progress));
      break;
    case DecayType::Cosine:
      f = b.mulScalar(b.addScalar(b.cos(b.mulScalar(progress, M_PI)), 1.0), 0.5);
      break;
    case DecayType::Linear:
      f = b.sub(b.splatLike(k, 1.0), progress);
      break;
    }
    f = b.addScalar(b.mulScalar(f, 1.0 - floor), floor);
    Value decaying = b.compare(k, b.splatLike(k, warmup + stable), CmpDir::GE);
    factor = b.select(decaying, f, factor);
  }
  if (warmup > 0) {
    Value ramp = b.mulScalar(b.addScalar(k, 1.0), 1.0 / warmup);
    factor = b.select(b.compare(k, b.splatLike(k, warmup), CmpDir::LT), ramp, factor);
  }
  return one(b.mulScalar(factor, op.getLr().convertToDouble()));
}

FailureOr<SmallVector<Value>> lower(AdamWOp op, AdamWOp::Adaptor a, HloBuilder &b,
                                    HloLoweringState &) {
  double beta1 = op.getBeta1().convertToDouble(), beta2 = op.getBeta2().convertToDouble(),
         eps = op.getEps().convertToDouble(), wd = op.getWeightDecay().convertToDouble();
  Value p = a.getParam(), m = a.getExpAvg(), v = a.getExpAvgSq(), lr = a.getLr();
  ArrayRef<int64_t> shape = HloBuilder::shapeOf(p);
  auto spread = [&](Value s) { return b.broadcast(s, shape, {}); };
  // Scalars: t = step + 1, the bias corrections, the decay and step size.
  Value t = b.convert(b.add(a.getStep(), b.splatLike(a.getStep(), 1)), b.f32());
  Value bc1 = b.sub(b.splatLike(t, 1.0), b.pow(b.splatLike(t, beta1), t));
  Value bc2 = b.sub(b.splatLike(t, 1.0), b.pow(b.splatLike(t, beta2), t));
  Value decayFactor = b.sub(b.splatLike(lr, 1.0), b.mulScalar(lr, wd));
  Value stepSize = b.div(lr, bc1);
  Value bc2Sqrt = b.sqrt(bc2);
  Value g = b.mul(a.getGrad(), spread(a.getGradScale()));
  // torch.lerp's two formulas, chosen by the weight as torch does.
  double w1 = 1.0 - beta1;
  Value mOut = w1 < 0.5 ? b.add(m, b.mulScalar(b.sub(g, m), w1))
                        : b.sub(g, b.mulScalar(b.sub(g, m), 1.0 - w1));
  Value vOut = b.add(b.mulScalar(v, beta2), b.mulScalar(b.mul(g, g), 1.0 - beta2));
  Value denom = b.addScalar(b.div(b.sqrt(vOut), spread(bc2Sqrt)), eps);
  Value pOut = b.sub(b.mul(p, spread(decayFactor)), b.mul(spread(stepSize), b.div(mOut, denom)));
  return SmallVector<Value>{pOut, mOut, vOut};
}

FailureOr<SmallVector<Value>> lower(NextStepOp, NextStepOp::Adaptor a, HloBuilder &b,
                                    HloLoweringState &) {
  return one(b.add(a.getStep(), b.splatLike(a.getStep(), 1)));
}

} // namespace

void populateLossAndOptimizerToHlo(RewritePatternSet &patterns, HloLoweringState &state) {
  addHloLowering<CrossEntropyOp>(patterns, state, lower);
  addHloLowering<CrossEntropyBackwardOp>(patterns, state, lower);
  addHloLowering<VocabParallelMaxOp>(patterns, state, lower);
  addHloLowering<VocabParallelStatsOp>(patterns, state, lower);
  addHloLowering<VocabParallelLossOp>(patterns, state, lower);
  addHloLowering<VocabParallelLossBackwardOp>(patterns, state, lower);
  addHloLowering<GlobalNormOp>(patterns, state, lower);
  addHloLowering<SqrtOp>(patterns, state, lower);
  addHloLowering<ClipCoefOp>(patterns, state, lower);
  addHloLowering<LrScheduleOp>(patterns, state, lower);
  addHloLowering<AdamWOp>(patterns, state, lower);
  addHloLowering<NextStepOp>(patterns, state, lower);
}

} // namespace kiln
