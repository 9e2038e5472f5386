//===- LowerToHloForward.cpp - Forward kiln ops to hlo --------------------===//
//
// The math of each op as lib/Runtime/ForwardKernels.cpp computes it, as XLA
// instructions. Attention works on [b, kv_heads, group, s, d]: a query
// head h = kv * group + g reads kv head kv without repeating K/V.
//
//===----------------------------------------------------------------------===//

#include "LowerToHlo.h"

#include "kiln/Dialect/Kiln/IR/KilnOps.h"

#include <cmath>
#include <limits>

using namespace mlir;

namespace kiln {

using CmpDir = hlo::ComparisonDirection;

Value causalMask(HloBuilder &b, HloLoweringState &state, ArrayRef<int64_t> scoresShape,
                 std::optional<ArrayRef<int16_t>> queryAxes, SequenceLayout layout) {
  int64_t rank = int64_t(scoresShape.size()), queries = scoresShape[rank - 2],
          keys = scoresShape.back();
  Value rows, cols;
  Value first = blockOffset(b, state, queries, queryAxes);
  if (!first && !layout.headTailChunks) {
    rows = b.iota({queries, keys}, 0, b.i32());
    cols = b.iota({queries, keys}, 1, b.i32());
  } else {
    // The true position of every row of the sequence, a constant; the
    // queries' are the rank's slice of it.
    std::vector<int32_t> table(keys);
    for (int64_t j = 0; j < keys; ++j)
      table[j] = int32_t(layout.position(j, keys));
    Value positions = b.constantI32(table);
    Value queryPositions = first ? b.dynamicSlice(positions, 0, first, queries) : positions;
    rows = b.broadcast(queryPositions, {queries, keys}, {0});
    cols = b.broadcast(positions, {queries, keys}, {1});
  }
  return b.broadcast(b.compare(rows, cols, CmpDir::GE), scoresShape, {rank - 2, rank - 1});
}

AttentionLayout AttentionLayout::of(Value q, Value k) {
  ArrayRef<int64_t> qs = HloBuilder::shapeOf(q);
  AttentionLayout l;
  l.batch = qs[0];
  l.seq = qs[1];
  l.heads = qs[2];
  l.headDim = qs[3];
  l.kvHeads = HloBuilder::shapeOf(k)[2];
  l.group = l.heads / l.kvHeads;
  return l;
}

Value AttentionLayout::toGroups(HloBuilder &b, Value x) const {
  Value x5 = b.reshape(x, {batch, seq, kvHeads, group, headDim});
  return b.transpose(x5, {0, 2, 3, 1, 4});
}

Value AttentionLayout::fromGroups(HloBuilder &b, Value x) const {
  return b.reshape(b.transpose(x, {0, 3, 1, 2, 4}), {batch, seq, heads, headDim});
}

Value AttentionLayout::scores(HloBuilder &b, Value qGroups, Value k, double scale) const {
  // [b, kv, g, s, d] . [b, s, kv, d] -> [b, kv, g, s_q, s_k]
  return b.mulScalar(b.dot(qGroups, k, {0, 1}, {0, 2}, {4}, {3}), scale);
}

namespace {

FailureOr<SmallVector<Value>> lower(EmbeddingOp op, EmbeddingOp::Adaptor a, HloBuilder &b,
                                    HloLoweringState &state) {
  int64_t rows = HloBuilder::shapeOf(a.getTable())[0];
  VocabIds ids = localVocabIds(b, state, a.getIds(), rows, op.getVocabAxes());
  Value rowsOut = b.gatherRows(a.getTable(), ids.ids);
  if (ids.inside) {
    ArrayRef<int64_t> shape = HloBuilder::shapeOf(rowsOut);
    rowsOut = b.select(b.broadcastLeading(ids.inside, shape), rowsOut, b.splatLike(rowsOut, 0));
  }
  return one(rowsOut);
}

FailureOr<SmallVector<Value>> lower(RmsNormOp op, RmsNormOp::Adaptor a, HloBuilder &b,
                                    HloLoweringState &) {
  Value x = a.getInput();
  ArrayRef<int64_t> shape = HloBuilder::shapeOf(x);
  Value inv = b.broadcastLeading(rmsInverse(b, x, op.getEps().convertToDouble()), shape);
  return one(b.mul(b.broadcastLast(a.getWeight(), shape), b.mul(x, inv)));
}

FailureOr<SmallVector<Value>> lower(LinearOp, LinearOp::Adaptor a, HloBuilder &b,
                                    HloLoweringState &) {
  int64_t last = HloBuilder::typeOf(a.getInput()).getRank() - 1;
  return one(b.dot(a.getInput(), a.getWeight(), {}, {}, {last}, {1}));
}

FailureOr<SmallVector<Value>> lower(RopeCacheOp op, RopeCacheOp::Adaptor, HloBuilder &b,
                                    HloLoweringState &) {
  int64_t seq = op.getSeqLen(), d = op.getHeadDim(), half = d / 2;
  // inv_freq in float32 as the CPU kernel computes it, repeated twice.
  std::vector<float> pairs = op.getInverseFrequencies(), invFreq(d);
  for (int64_t i = 0; i < half; ++i)
    invFreq[i] = invFreq[i + half] = pairs[i];
  SequenceLayout layout = SequenceLayout::ofChunks(op.getHeadTailChunks());
  Value pos;
  if (!layout.headTailChunks) {
    pos = b.convert(b.iota({seq, d}, 0, b.i32()), b.f32());
  } else {
    std::vector<float> positions(seq);
    for (int64_t r = 0; r < seq; ++r)
      positions[r] = float(layout.position(r, seq));
    pos = b.broadcast(b.constantF32(positions), {seq, d}, {0});
  }
  Value angles = b.mul(pos, b.broadcast(b.constantF32(invFreq), {seq, d}, {1}));
  return one(b.concat({b.cos(angles), b.sin(angles)}, 1));
}

FailureOr<SmallVector<Value>> lower(RopeOp, RopeOp::Adaptor a, HloBuilder &b,
                                    HloLoweringState &) {
  return SmallVector<Value>{rotate(b, a.getQ(), a.getCache(), false),
                            rotate(b, a.getK(), a.getCache(), false)};
}

FailureOr<SmallVector<Value>> lower(AttentionOp op, AttentionOp::Adaptor a, HloBuilder &b,
                                    HloLoweringState &state) {
  AttentionLayout l = AttentionLayout::of(a.getQ(), a.getK());
  Value scores = l.scores(b, l.toGroups(b, a.getQ()), a.getK(),
                          op.getScale().convertToDouble());
  ArrayRef<int64_t> shape = HloBuilder::shapeOf(scores);
  if (op.getCausal())
    scores = b.select(causalMask(b, state, shape, op.getQueryAxes(),
                                 SequenceLayout::ofChunks(op.getHeadTailChunks())),
                      scores, b.splatLike(scores, -std::numeric_limits<double>::infinity()));
  Value mx = b.maxLast(scores);
  Value e = b.exp(b.sub(scores, b.broadcastLeading(mx, shape)));
  Value sum = b.sumLast(e);
  Value lse = b.reshape(b.add(mx, b.log(sum)), {l.batch, l.heads, l.seq});
  Value p = b.div(e, b.broadcastLeading(sum, shape));
  // [b, kv, g, s_q, s_k] . [b, s, kv, d] -> [b, kv, g, s_q, d]
  Value out = b.dot(p, a.getV(), {0, 1}, {0, 2}, {4}, {1});
  return SmallVector<Value>{l.fromGroups(b, out), lse};
}

FailureOr<SmallVector<Value>> lower(SwigluOp, SwigluOp::Adaptor a, HloBuilder &b,
                                    HloLoweringState &) {
  return one(swiglu(b, a.getGate(), a.getUp()));
}

FailureOr<SmallVector<Value>> lower(AddOp, AddOp::Adaptor a, HloBuilder &b, HloLoweringState &) {
  return one(b.add(a.getLhs(), a.getRhs()));
}

// The narrowing convert, and the widening one back to the float32 the kiln
// value's consumers take; kiln-hlo-sink-converts then moves the widening
// past data movement and into dots, so bf16 values travel and multiply.
FailureOr<SmallVector<Value>> lower(CastOp op, CastOp::Adaptor a, HloBuilder &b,
                                    HloLoweringState &) {
  return one(b.roundTo(a.getInput(), op.getTo()));
}

FailureOr<SmallVector<Value>> lower(ReshapeOp op, ReshapeOp::Adaptor a, HloBuilder &b,
                                    HloLoweringState &) {
  return one(b.reshape(a.getInput(), op.getShape()));
}

FailureOr<SmallVector<Value>> lower(TransposeOp op, TransposeOp::Adaptor a, HloBuilder &b,
                                    HloLoweringState &) {
  return one(b.transpose(a.getInput(), op.getPermutation()));
}

FailureOr<SmallVector<Value>> lower(PadOp op, PadOp::Adaptor a, HloBuilder &b,
                                    HloLoweringState &) {
  return one(b.padEnd(a.getInput(), op.getDim(), op.getSize()));
}

FailureOr<SmallVector<Value>> lower(NarrowOp op, NarrowOp::Adaptor a, HloBuilder &b,
                                    HloLoweringState &) {
  return one(b.slice(a.getInput(), op.getDim(), 0, op.getSize()));
}

FailureOr<SmallVector<Value>> lower(ConstantOp op, ConstantOp::Adaptor, HloBuilder &b,
                                    HloLoweringState &) {
  auto type = cast<RankedTensorType>(op.getType());
  auto dense = dyn_cast<DenseElementsAttr>(op.getValue());
  if (!dense)
    return op.emitOpError("kiln-lower-to-hlo: only dense constants lower to HLO");
  if (dense.isSplat())
    return one(b.splat(type, dense.getSplatValue<APFloat>().convertToDouble()));
  return one(hlo::ConstantOp::create(b.builder(), b.location(), type, op.getValue()).getResult());
}

} // namespace

Value swiglu(HloBuilder &b, Value gate, Value up) {
  return b.mul(b.div(gate, b.addScalar(b.exp(b.neg(gate)), 1.0)), up);
}

Value rmsInverse(HloBuilder &b, Value x, double eps) {
  int64_t dim = HloBuilder::shapeOf(x).back();
  Value meanSq = b.mulScalar(b.sumLast(b.mul(x, x)), 1.0 / double(dim));
  return b.rsqrt(b.addScalar(meanSq, eps));
}

Value rotate(HloBuilder &b, Value x, Value cache, bool transpose) {
  ArrayRef<int64_t> shape = HloBuilder::shapeOf(x);
  int64_t d = shape.back(), half = d / 2;
  Value cos = b.broadcast(b.slice(cache, 1, 0, d), shape, {1, 3});
  Value sin = b.broadcast(b.slice(cache, 1, d, 2 * d), shape, {1, 3});
  if (!transpose) {
    // x * cos + rotate_half(x) * sin, rotate_half(x) = cat(-x[half:], x[:half])
    Value rotated = b.concat({b.neg(b.slice(x, 3, half, d)), b.slice(x, 3, 0, half)}, 3);
    return b.add(b.mul(x, cos), b.mul(rotated, sin));
  }
  // The transpose of the rotation: g * cos + cat((g sin)[half:], -(g sin)[:half]).
  Value gs = b.mul(x, sin);
  Value rotated = b.concat({b.slice(gs, 3, half, d), b.neg(b.slice(gs, 3, 0, half))}, 3);
  return b.add(b.mul(x, cos), rotated);
}

void populateForwardToHlo(RewritePatternSet &patterns, HloLoweringState &state) {
  addHloLowering<EmbeddingOp>(patterns, state, lower);
  addHloLowering<RmsNormOp>(patterns, state, lower);
  addHloLowering<LinearOp>(patterns, state, lower);
  addHloLowering<RopeCacheOp>(patterns, state, lower);
  addHloLowering<RopeOp>(patterns, state, lower);
  addHloLowering<AttentionOp>(patterns, state, lower);
  addHloLowering<SwigluOp>(patterns, state, lower);
  addHloLowering<AddOp>(patterns, state, lower);
  addHloLowering<CastOp>(patterns, state, lower);
  addHloLowering<ReshapeOp>(patterns, state, lower);
  addHloLowering<TransposeOp>(patterns, state, lower);
  addHloLowering<PadOp>(patterns, state, lower);
  addHloLowering<NarrowOp>(patterns, state, lower);
  addHloLowering<ConstantOp>(patterns, state, lower);
}

} // namespace kiln
