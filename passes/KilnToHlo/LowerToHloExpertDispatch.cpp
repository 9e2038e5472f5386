//===- LowerToHloExpertDispatch.cpp - The token dispatcher to hlo ---------===//
//
// kiln.expert_dispatch, kiln.expert_combine and their gradients
// (lib/Runtime/ExpertDispatchKernels.cpp) as XLA instructions of static
// shape.
//
// The CPU kernel places pairs in one sequential pass; here a pair's place
// in its block is the number of pairs before it (slot-major, in its chunk)
// routed to the same block: an exclusive cumulative sum of the pairs' block
// one-hots. XLA has no scan instruction, and reduce-window is slow on
// Trainium, so the sum is two strictly-lower-triangular matmuls (within
// blocks of 128 pairs, then over the blocks' totals), GShard's way on
// matmul units. The counts are exact: 0/1 inputs (exact in bf16 too, were
// a matmul narrowed) summed in float32, up to 2^24 pairs per chunk.
//
// Every lowering moves rows with gathers of whole rows from a table whose
// row 0 is zero: a dropped pair, or an unfilled buffer row, reads row 0. A
// buffer row's source (token, pair) comes from one small scatter (float32,
// converted to s32); the wide [rows, hidden] data is only ever gathered.
//
//===----------------------------------------------------------------------===//

#include "LowerToHlo.h"

#include "kiln/Dialect/Kiln/IR/KilnOps.h"

using namespace mlir;

namespace kiln {
namespace {

using CmpDir = hlo::ComparisonDirection;

/// The pairs of one dispatch: `chunks` chunks of `perChunk` tokens with `k`
/// slots each, and the buffer they fill, `groups` blocks of `chunks *
/// capacity` rows.
struct DispatchShape {
  int64_t chunks, perChunk, k, groups, capacity;

  static DispatchShape of(Value pairs, int64_t chunks, int64_t groups, int64_t capacity) {
    ArrayRef<int64_t> shape = HloBuilder::shapeOf(pairs);
    int64_t k = shape.back(), tokens = HloBuilder::typeOf(pairs).getNumElements() / k;
    return {chunks, tokens / chunks, k, groups, capacity};
  }
  int64_t tokens() const { return chunks * perChunk; }
  int64_t rows() const { return groups * chunks * capacity; }
  /// [chunks, perChunk, k]: every pair, in token order.
  SmallVector<int64_t> pairGrid() const { return {chunks, perChunk, k}; }
};

/// v [B, ..., k] as [chunks, perChunk, k] s32.
Value pairsI32(HloBuilder &b, const DispatchShape &s, Value v) {
  return b.reshape(b.convert(v, b.i32()), s.pairGrid());
}

/// v [..., w] as a table [rows, w] with a zero row 0 (a pad, which a
/// widening convert sinks below, so bf16 rows stay bf16 in the table).
Value zeroRowTable(HloBuilder &b, Value v) {
  ArrayRef<int64_t> shape = HloBuilder::shapeOf(v);
  int64_t w = shape.back();
  return b.padZeros(b.reshape(v, {HloBuilder::typeOf(v).getNumElements() / w, w}), 0, 1, 0);
}

/// v as one column [elements, 1].
Value asColumn(HloBuilder &b, Value v) {
  return b.reshape(v, {HloBuilder::typeOf(v).getNumElements(), 1});
}

/// Each pair's buffer row plus one (row 0: dropped), s32 [chunks, perChunk,
/// k], from its block and its place in the block's part of its chunk.
Value shiftedRows(HloBuilder &b, const DispatchShape &s, Value group, Value place, Value kept) {
  Value chunk = b.iota(s.pairGrid(), 0, b.i32());
  Value row = b.add(b.add(b.mulScalar(group, double(s.chunks * s.capacity)),
                          b.mulScalar(chunk, double(s.capacity))),
                    place);
  return b.select(kept, b.addScalar(row, 1), b.splatLike(row, 0));
}

/// shiftedRows of pairs given by their slots (g * capacity + c, or -1).
Value shiftedRowsOfSlots(HloBuilder &b, const DispatchShape &s, Value slots) {
  Value slot = pairsI32(b, s, slots);
  Value kept = b.compare(slot, b.splatLike(slot, 0), CmpDir::GE);
  Value group = b.div(b.max(slot, b.splatLike(slot, 0)), b.splatLike(slot, double(s.capacity)));
  Value place = b.sub(slot, b.mulScalar(group, double(s.capacity)));
  return shiftedRows(b, s, group, place, kept);
}

/// Per buffer row, `values` [chunks, perChunk, k, w] (s32, nonzero) of the
/// pair placed there, 0 where unfilled: [rows, w] s32. Each kept row is
/// written by exactly one pair; the dropped ones add up in row 0, cut off.
/// The scatter adds in float32 (neuronx-cc rejects integer scatter-reduce,
/// NCC_EVRF016): the values, pair numbers, are exact there up to 2^24.
Value rowSources(HloBuilder &b, const DispatchShape &s, Value rows, Value values) {
  int64_t w = HloBuilder::shapeOf(values).back();
  Value table = b.scatterAddRows(b.splat(b.tensor({s.rows() + 1, w}, b.f32()), 0), rows,
                                 b.convert(values, b.f32()));
  return b.convert(b.slice(table, 0, 1, s.rows() + 1), b.i32());
}

/// Each pair's index plus one in token order, or its token's: s32
/// [chunks, perChunk, k, 1].
Value pairNumbers(HloBuilder &b, const DispatchShape &s, bool tokensOnly) {
  SmallVector<int64_t> grid = s.pairGrid();
  auto term = [&](int64_t dim, int64_t stride) {
    Value index = b.iota(grid, dim, b.i32());
    return stride == 1 ? index : b.mulScalar(index, double(stride));
  };
  Value n = tokensOnly ? b.add(term(0, s.perChunk), term(1, 1))
                       : b.add(b.add(term(0, s.perChunk * s.k), term(1, s.k)), term(2, 1));
  SmallVector<int64_t> column(grid);
  column.push_back(1);
  return b.reshape(b.addScalar(n, 1), column);
}

/// Each token's kept rows of `buffer` [groups, chunks * capacity, H] summed
/// (ascending slots): [tokens, H] in `like`'s leading shape.
Value sumOwnRows(HloBuilder &b, const DispatchShape &s, Value rows, Value buffer, Value like) {
  Value gathered = b.gatherRows(zeroRowTable(b, buffer), rows); // [chunks, perChunk, k, H]
  Value summed = b.sum(gathered, {2});
  SmallVector<int64_t> shape(HloBuilder::shapeOf(like));
  shape.back() = HloBuilder::shapeOf(buffer).back();
  return b.reshape(summed, shape);
}

FailureOr<SmallVector<Value>> lower(ExpertDispatchOp op, ExpertDispatchOp::Adaptor a,
                                    HloBuilder &b, HloLoweringState &) {
  auto s = DispatchShape::of(a.getExperts(), int64_t(op.getChunks()), int64_t(op.getGroups()),
                             int64_t(op.getCapacity()));
  int64_t perGroup = int64_t(op.getNumExperts()) / s.groups;
  Value ids = pairsI32(b, s, a.getExperts());
  Value group = b.div(ids, b.splatLike(ids, double(perGroup)));
  // The pairs slot-major within each chunk (first choices first):
  // [chunks, k * perChunk, G], and each one's place in its block.
  Value onehot = b.convert(b.oneHot(group, s.groups), b.f32()); // [chunks, perChunk, k, G]
  Value ordered = b.reshape(b.transpose(onehot, {0, 2, 1, 3}),
                            {s.chunks, s.k * s.perChunk, s.groups});
  Value before = b.sumLast(b.mul(exclusiveCumsum(b, ordered), ordered));
  Value place = b.transpose(b.reshape(before, {s.chunks, s.k, s.perChunk}), {0, 2, 1});
  Value kept = b.compare(place, b.splatLike(place, double(s.capacity)), CmpDir::LT);
  Value placeI = b.convert(place, b.i32());
  Value slot = b.select(kept, b.add(b.mulScalar(group, double(s.capacity)), placeI),
                        b.splatLike(placeI, -1));

  // Each buffer row's token and pair (plus one; 0 unfilled), then its data.
  Value rows = shiftedRows(b, s, group, placeI, kept);
  Value sources = rowSources(
      b, s, rows, b.concat({pairNumbers(b, s, true), pairNumbers(b, s, false)}, 3)); // [R, 2]
  Value token = b.reshape(b.slice(sources, 1, 0, 1), {s.rows()});
  Value pair = b.reshape(b.slice(sources, 1, 1, 2), {s.rows()});
  Value bufferRows = b.gatherRows(zeroRowTable(b, a.getInput()), token);
  Value rowWeights = b.gatherRows(zeroRowTable(b, asColumn(b, a.getWeights())), pair);
  Value rowIds = b.gatherRows(zeroRowTable(b, asColumn(b, b.addScalar(ids, 1))), pair);
  Value rowExperts = b.addScalar(rowIds, -1); // unfilled: -1
  auto typeOf = [](Value v) { return cast<RankedTensorType>(v.getType()); };
  return SmallVector<Value>{
      b.reshape(bufferRows, typeOf(op.getRows()).getShape()),
      b.reshape(rowWeights, typeOf(op.getRowWeights()).getShape()),
      b.convert(b.reshape(rowExperts, typeOf(op.getRowExperts()).getShape()),
                typeOf(op.getRowExperts()).getElementType()),
      b.convert(b.reshape(slot, typeOf(op.getSlots()).getShape()),
                typeOf(op.getSlots()).getElementType())};
}

/// The dispatch shape of a buffer [groups, chunks * capacity, H] and the
/// slots that index it.
DispatchShape shapeOfBuffer(Value slots, Value buffer, int64_t chunks) {
  ArrayRef<int64_t> shape = HloBuilder::shapeOf(buffer);
  return DispatchShape::of(slots, chunks, shape[0], shape[1] / chunks);
}

FailureOr<SmallVector<Value>> lower(ExpertCombineOp op, ExpertCombineOp::Adaptor a,
                                    HloBuilder &b, HloLoweringState &) {
  DispatchShape s = shapeOfBuffer(a.getSlots(), a.getRows(), int64_t(op.getChunks()));
  Value rows = shiftedRowsOfSlots(b, s, a.getSlots());
  return one(sumOwnRows(b, s, rows, a.getRows(), a.getSlots()));
}

FailureOr<SmallVector<Value>> lower(ExpertDispatchBackwardOp op,
                                    ExpertDispatchBackwardOp::Adaptor a, HloBuilder &b,
                                    HloLoweringState &) {
  DispatchShape s = shapeOfBuffer(a.getSlots(), a.getRowsGrad(), int64_t(op.getChunks()));
  Value rows = shiftedRowsOfSlots(b, s, a.getSlots());
  Value dx = sumOwnRows(b, s, rows, a.getRowsGrad(), a.getSlots());
  // d weights[t, j]: the weight gradient of the pair's row, 0 when dropped.
  Value dw = b.gatherRows(zeroRowTable(b, asColumn(b, a.getRowWeightsGrad())), rows);
  return SmallVector<Value>{dx, b.reshape(dw, HloBuilder::shapeOf(op.getWeightsGrad()))};
}

FailureOr<SmallVector<Value>> lower(ExpertCombineBackwardOp op,
                                    ExpertCombineBackwardOp::Adaptor a, HloBuilder &b,
                                    HloLoweringState &) {
  auto s = DispatchShape::of(a.getSlots(), int64_t(op.getChunks()), int64_t(op.getGroups()),
                             int64_t(op.getCapacity()));
  Value rows = shiftedRowsOfSlots(b, s, a.getSlots());
  // Each kept row takes its token's gradient.
  Value token = b.reshape(rowSources(b, s, rows, pairNumbers(b, s, true)), {s.rows()});
  Value grad = b.gatherRows(zeroRowTable(b, a.getResultGrad()), token);
  return one(b.reshape(grad, HloBuilder::shapeOf(op.getRowsGrad())));
}

} // namespace

/// m[t, i] = 1 if i < t: [n, n] f32.
static Value strictlyLower(HloBuilder &b, int64_t n) {
  Value later = b.compare(b.iota({n, n}, 1, b.i32()), b.iota({n, n}, 0, b.i32()), CmpDir::LT);
  return b.convert(later, b.f32());
}

Value exclusiveCumsum(HloBuilder &b, Value m) {
  ArrayRef<int64_t> shape = HloBuilder::shapeOf(m);
  int64_t chunks = shape[0], length = shape[1], groups = shape[2];
  int64_t bs = std::min<int64_t>(length, 128), nb = (length + bs - 1) / bs;
  // Padding after the last pair changes no earlier prefix.
  Value padded = nb * bs == length ? m : b.padEnd(m, 1, nb * bs);
  Value blocks = b.reshape(padded, {chunks, nb, bs, groups});
  // [bs, bs] . [chunks, nb, bs, G] over the block's pairs -> [bs, chunks, nb, G]
  Value within = b.transpose(b.dot(strictlyLower(b, bs), blocks, {}, {}, {1}, {2}), {1, 2, 0, 3});
  if (nb > 1) {
    Value totals = b.sum(blocks, {2}); // [chunks, nb, G]
    Value before = b.transpose(b.dot(strictlyLower(b, nb), totals, {}, {}, {1}, {1}), {1, 0, 2});
    within = b.add(within, b.broadcast(before, {chunks, nb, bs, groups}, {0, 1, 3}));
  }
  Value sums = b.reshape(within, {chunks, nb * bs, groups});
  return nb * bs == length ? sums : b.slice(sums, 1, 0, length);
}

void populateExpertDispatchToHlo(RewritePatternSet &patterns, HloLoweringState &state) {
  addHloLowering<ExpertDispatchOp>(patterns, state, lower);
  addHloLowering<ExpertCombineOp>(patterns, state, lower);
  addHloLowering<ExpertDispatchBackwardOp>(patterns, state, lower);
  addHloLowering<ExpertCombineBackwardOp>(patterns, state, lower);
}

} // namespace kiln
