//===- LowerToHloBlockRouting.cpp - nkilib's blockwise MoE form in hlo ----===//
//
// A grouped-experts call bound to nkilib's blockwise MoE kernels (moe_cte)
// takes its pairs (token, expert) sorted into blocks of B rows, one expert a
// block, as nkilib's own tests build them (test_bwmm_bwd_common.py,
// generate_token_position_to_id_and_experts): expert e's pairs in token
// order fill ceil(c_e / B) blocks from its first block; the blocks no
// expert fills (N is static, NkiBlockRouting::blockCount) go to the last
// expert, padding rows only. A padding row reads token T, the zero row
// appended to the tokens, whose affinity is 0.
//
// Static shapes, no integer scatter-reduce: a pair's place among its
// expert's pairs is an exclusive prefix sum of one-hots (triangular
// matmuls, as the all-to-all dispatcher's), the rows' tokens one float32
// scatter-add (each row written by one pair, exact to 2^24) converted to s32.
//
//===----------------------------------------------------------------------===//

#include "LowerToHlo.h"

#include "kiln/Dialect/Kiln/IR/NkiBinding.h"

using namespace mlir;

namespace kiln {

SmallVector<Value> blockRouting(HloBuilder &b, const NkiBlockRouting &routing, ValueRange inputs,
                                Value firstExpert) {
  using CmpDir = hlo::ComparisonDirection;
  Value x = inputs[routing.tokens], weights = inputs[routing.weights], ids = inputs[routing.ids],
        gate = inputs[routing.gate], up = inputs[routing.up], down = inputs[routing.down];
  int64_t hidden = HloBuilder::shapeOf(x).back(),
          tokens = HloBuilder::typeOf(x).getNumElements() / hidden,
          k = HloBuilder::shapeOf(ids).back(), pairs = tokens * k,
          experts = HloBuilder::shapeOf(gate)[0], inter = HloBuilder::shapeOf(gate)[1],
          blockSize = routing.blockSize,
          blocks = NkiBlockRouting::blockCount(pairs, experts, blockSize),
          rows = blocks * blockSize;

  // [1, P, E]: pair p (token p / k, slot p % k) routed to local expert e.
  Value hot = b.oneHot(b.reshape(b.convert(ids, b.i32()), {1, pairs}), experts, firstExpert);
  Value hotF = b.convert(hot, b.f32());
  Value place = b.sum(b.mul(exclusiveCumsum(b, hotF), hotF), {2}); // [1, P]
  Value kept = b.compare(b.sum(hotF, {2}), b.splat(b.tensor({1, pairs}, b.f32()), 0), CmpDir::GT);

  // Blocks per expert, the spare ones to the last; each expert's first.
  Value counts = b.convert(b.sum(hotF, {0, 1}), b.i32()); // [E]
  Value perExpert =
      b.div(b.addScalar(counts, double(blockSize - 1)), b.splatLike(counts, double(blockSize)));
  Value spare = b.sub(b.scalar(b.i32(), double(blocks)), b.sum(perExpert, {0}));
  Value isLast = b.compare(b.iota({experts}, 0, b.i32()),
                           b.splat(b.tensor({experts}, b.i32()), double(experts - 1)), CmpDir::EQ);
  perExpert = b.select(isLast, b.add(perExpert, b.broadcast(spare, {experts}, {})), perExpert);
  Value perExpertF = b.convert(perExpert, b.f32());
  Value firstBlock =
      b.reshape(exclusiveCumsum(b, b.reshape(perExpertF, {1, experts, 1})), {experts});

  // Token positions: row (first block * B + place) holds token p / k; the
  // scatter adds token + 1 at row + 1 (row 0 takes the pairs left out).
  Value firstRow =
      b.broadcast(b.mulScalar(firstBlock, double(blockSize)), {1, pairs, experts}, {2});
  Value row = b.add(b.sum(b.mul(firstRow, hotF), {2}), place);
  Value target = b.select(kept, b.addScalar(b.convert(row, b.i32()), 1),
                          b.splat(b.tensor({1, pairs}, b.i32()), 0));
  Value token = b.div(b.iota({1, pairs}, 1, b.i32()), b.splat(b.tensor({1, pairs}, b.i32()), k));
  Value table =
      b.scatterAddRows(b.splat(b.tensor({rows + 1, 1}, b.f32()), 0), b.reshape(target, {pairs}),
                       b.reshape(b.convert(b.addScalar(token, 1), b.f32()), {pairs, 1}));
  Value held =
      b.addScalar(b.convert(b.reshape(b.slice(table, 0, 1, rows + 1), {rows}), b.i32()), -1);
  Value positions = b.select(b.compare(held, b.splatLike(held, 0), CmpDir::LT),
                             b.splatLike(held, double(tokens)), held);

  // Block n's expert: the experts whose blocks end at or before n.
  Value ends = b.add(firstBlock, perExpertF);
  Value ended = b.compare(b.broadcast(ends, {blocks, experts}, {1}),
                          b.convert(b.iota({blocks, experts}, 0, b.i32()), b.f32()), CmpDir::LE);
  Value blockExperts = b.min(b.sum(b.convert(ended, b.i32()), {1}),
                             b.splat(b.tensor({blocks}, b.i32()), double(experts - 1)));

  // Affinities [(T + 1) * E, 1]: token t's weight for expert e, 0 unrouted.
  Type weightType = HloBuilder::typeOf(weights).getElementType();
  Value pairWeights = b.broadcast(b.reshape(weights, {tokens, k}), {tokens, k, experts}, {0, 1});
  Value routed = b.select(b.reshape(hot, {tokens, k, experts}), pairWeights,
                          b.splat(b.tensor({tokens, k, experts}, weightType), 0));
  Value affinities =
      b.reshape(b.padZeros(b.sum(routed, {1}), 0, 0, 1), {(tokens + 1) * experts, 1});

  // The tokens with their zero row; gate and up as [E, H, 2, I]; down [E, I, H].
  Value hiddenRows = b.padZeros(b.reshape(x, {tokens, hidden}), 0, 0, 1);
  Value stacked = b.concat(
      {b.reshape(gate, {1, experts, inter, hidden}), b.reshape(up, {1, experts, inter, hidden})},
      0);
  // The backward's cotangent rows as the tokens'; the checkpoints come
  // from a prologue call (NkiBinding::prologue).
  Value outputGrad;
  if (routing.cotangent >= 0)
    outputGrad =
        b.padZeros(b.reshape(inputs[unsigned(routing.cotangent)], {tokens, hidden}), 0, 0, 1);
  return {hiddenRows,
          affinities,
          b.transpose(stacked, {1, 3, 0, 2}),
          b.transpose(down, {0, 2, 1}),
          positions,
          b.reshape(blockExperts, {blocks, 1}),
          outputGrad,
          Value(),
          Value()};
}

Value routedPairs(HloBuilder &b, const NkiBlockRouting &routing, ValueRange inputs,
                  Value firstExpert, Value affinities) {
  using CmpDir = hlo::ComparisonDirection;
  Value ids = inputs[routing.ids];
  int64_t experts = HloBuilder::shapeOf(inputs[routing.gate])[0],
          pairs = HloBuilder::typeOf(ids).getNumElements(), k = HloBuilder::shapeOf(ids).back();
  Value local = b.convert(ids, b.i32());
  if (firstExpert)
    local = b.sub(local, b.broadcast(firstExpert, HloBuilder::shapeOf(local), {}));
  local = b.reshape(local, {pairs});
  Value zero = b.splatLike(local, 0);
  Value inside = b.logicalAnd(b.compare(local, zero, CmpDir::GE),
                              b.compare(local, b.splatLike(local, double(experts)), CmpDir::LT));
  // Pair p's entry: row (p / k) * E + its local expert.
  Value token = b.div(b.iota({pairs}, 0, b.i32()), b.splatLike(local, double(k)));
  Value row = b.add(b.mulScalar(token, double(experts)), b.select(inside, local, zero));
  Value values = b.reshape(b.gatherRows(affinities, row), {pairs});
  values = b.select(inside, values, b.splatLike(values, 0));
  return b.reshape(values, HloBuilder::shapeOf(ids));
}

} // namespace kiln
