//===- KilnShardingRules.cpp - How each op may be split -------------------===//
//
// Each op's ShardingRule: its loops (splittable or whole) and the loop every
// operand and result dimension follows. Leading dimensions of any rank
// (batch, sequence) are loops of their own; a dimension that must stay
// whole on one rank (a normalised feature, a causal sequence, a gathered
// vocabulary) maps to a whole loop or to none.
//
//===----------------------------------------------------------------------===//

#include "kiln/Dialect/Kiln/IR/KilnOps.h"

using namespace mlir;
using namespace kiln;

namespace {

using Map = SmallVector<int64_t>;

int64_t rankOf(Value v) { return cast<RankedTensorType>(v.getType()).getRank(); }

/// One new loop per dimension of a rank-`rank` tensor.
Map loops(ShardingRule &rule, int64_t rank, bool canSplit = true) {
  Map map;
  for (int64_t i = 0; i < rank; ++i)
    map.push_back(rule.loop(canSplit));
  return map;
}

Map concat(Map a, ArrayRef<int64_t> b) {
  a.append(b.begin(), b.end());
  return a;
}

/// Every operand and result follows the same loops, dimension by dimension.
ShardingRule elementwise(Operation *op) {
  ShardingRule rule;
  Map map = loops(rule, rankOf(op->getResult(0)));
  for (Value operand : op->getOperands())
    rule.operands.push_back(rankOf(operand) == int64_t(map.size()) ? map : Map(rankOf(operand), -1));
  for (unsigned i = 0; i < op->getNumResults(); ++i)
    rule.results.push_back(map);
  return rule;
}

/// Scalars and other ops nothing may split: every dimension maps to no loop.
ShardingRule whole(Operation *op) {
  ShardingRule rule;
  for (Value operand : op->getOperands())
    rule.operands.push_back(Map(rankOf(operand), -1));
  for (Value result : op->getResults())
    rule.results.push_back(Map(rankOf(result), -1));
  return rule;
}

/// rope / rope_backward: [B, S, H, D] and [B, S, Hkv, D] with the cache
/// [S, 2D]; heads split freely, D stays whole (rotate-half pairs).
ShardingRule ropeRule() {
  ShardingRule rule;
  int64_t b = rule.loop(), s = rule.loop(), h = rule.loop(), hk = rule.loop(),
          d = rule.loop(false);
  rule.operands = {{b, s, h, d}, {b, s, hk, d}, {s, -1}};
  rule.results = {{b, s, h, d}, {b, s, hk, d}};
  return rule;
}

/// attention: query heads and kv heads split together in whole groups (one
/// loop for both). The query sequence splits (context parallelism: each rank
/// attends its block of queries); the key sequence stays whole, so split
/// keys and values are gathered, and their gradients are partial sums over
/// the query split. head_dim stays whole.
struct AttentionLoops {
  int64_t b, sq, sk, g, d;
};
AttentionLoops attentionLoops(ShardingRule &rule) {
  return {rule.loop(), rule.loop(), rule.loop(false), rule.loop(), rule.loop(false)};
}

} // namespace

ShardingRule EmbeddingOp::getShardingRule() {
  ShardingRule rule;
  Map ids = loops(rule, rankOf(getIds()));
  // A vocabulary split (torchtitan's vocabulary-parallel embedding) leaves
  // each rank the rows it holds, zero elsewhere: a partial sum over the
  // split. kiln-partition gives the lookup its shard (vocab_axes).
  int64_t v = rule.loop(), d = rule.loop();
  rule.operands = {{v, d}, ids};
  rule.results = {concat(ids, {d})};
  rule.reductions = {{v}};
  return rule;
}

ShardingRule kiln::rmsNormShardingRule(int64_t rank, bool backward) {
  ShardingRule rule;
  Map lead = loops(rule, rank - 1);
  int64_t d = rule.loop(false);
  Map full = concat(lead, {d});
  if (!backward) {
    rule.operands = {full, {d}};
    rule.results = {full};
    return rule;
  }
  rule.operands = {full, full, {d}};
  rule.results = {full, {d}};
  rule.reductions = {{}, lead}; // the weight gradient sums over the leading loops
  return rule;
}

ShardingRule RmsNormOp::getShardingRule() {
  return rmsNormShardingRule(rankOf(getInput()), /*backward=*/false);
}

ShardingRule LinearOp::getShardingRule() {
  ShardingRule rule;
  Map lead = loops(rule, rankOf(getInput()) - 1);
  int64_t n = rule.loop(), k = rule.loop();
  rule.operands = {concat(lead, {k}), {n, k}};
  rule.results = {concat(lead, {n})};
  rule.reductions = {{k}};
  return rule;
}

ShardingRule RopeCacheOp::getShardingRule() { return whole(*this); }
ShardingRule RopeOp::getShardingRule() { return ropeRule(); }

ShardingRule AttentionOp::getShardingRule() {
  ShardingRule rule;
  auto [b, sq, sk, g, d] = attentionLoops(rule);
  rule.operands = {{b, sq, g, d}, {b, sk, g, d}, {b, sk, g, d}};
  rule.results = {{b, sq, g, d}, {b, g, sq}};
  return rule;
}

ShardingRule SwigluOp::getShardingRule() { return elementwise(*this); }
ShardingRule AddOp::getShardingRule() {
  ShardingRule rule = elementwise(*this);
  rule.sumsPartials = true;
  return rule;
}

ShardingRule CastOp::getShardingRule() {
  // Each rank rounds its own partial sums (FSDP2 rounds a rank's bf16
  // gradient before the float32 reduce-scatter), so partials flow through.
  ShardingRule rule = elementwise(*this);
  rule.sumsPartials = true;
  return rule;
}

ShardingRule CrossEntropyOp::getShardingRule() {
  // Splitting positions leaves each rank a partial sum of the mean (the
  // partitioner sets total_positions). A split vocabulary is loss parallel:
  // kiln-partition rewrites the op into the vocab_parallel ops around
  // collectives, so the loss is not a partial sum over it.
  ShardingRule rule;
  Map lead = loops(rule, rankOf(getLabels()));
  int64_t v = rule.loop();
  rule.operands = {concat(lead, {v}), lead};
  rule.results = {{}};
  rule.reductions = {lead};
  return rule;
}

ShardingRule ReshapeOp::getShardingRule() {
  // Input and output dimensions fall into groups of equal products (a kept
  // dimension is a group of one; [b, s, h * d] -> [b, s, h, d] has groups
  // {b}, {s}, {h*d | h, d}). Each group is one loop on its major-most
  // dimension on both sides: splitting h*d into blocks splits h alike. The
  // group's minor dimensions stay whole.
  ShardingRule rule;
  ArrayRef<int64_t> in = getInput().getType().getShape(), out = getShape();
  Map inMap(in.size(), -1), outMap(out.size(), -1);
  size_t i = 0, o = 0;
  while (i < in.size() && o < out.size()) {
    size_t i0 = i, o0 = o;
    int64_t pi = in[i++], po = out[o++];
    while (pi != po) {
      if (pi < po && i < in.size())
        pi *= in[i++];
      else if (po < pi && o < out.size())
        po *= out[o++];
      else
        break;
    }
    int64_t l = rule.loop(pi == po);
    inMap[i0] = l;
    outMap[o0] = l;
  }
  rule.operands = {inMap};
  rule.results = {outMap};
  return rule;
}

/// pad / narrow: every dimension a loop of its own; the resized one whole.
static ShardingRule resizeRule(Operation *op, int64_t dim) {
  ShardingRule rule;
  Map map;
  for (int64_t d = 0, e = rankOf(op->getResult(0)); d < e; ++d)
    map.push_back(rule.loop(d != dim));
  rule.operands = {map};
  rule.results = {map};
  return rule;
}
ShardingRule PadOp::getShardingRule() { return resizeRule(*this, int64_t(getDim())); }
ShardingRule NarrowOp::getShardingRule() { return resizeRule(*this, int64_t(getDim())); }

ShardingRule ConstantOp::getShardingRule() {
  // A splat is the same on every rank: any split is a local splat.
  ShardingRule rule;
  rule.results = {loops(rule, rankOf(getResult()))};
  return rule;
}

ShardingRule EmbeddingBackwardOp::getShardingRule() {
  ShardingRule rule;
  Map ids = loops(rule, rankOf(getIds()));
  // The vocabulary loop belongs to the result alone: kiln-shard splits it
  // as the table's gradient is stored (vocabulary parallel).
  int64_t v = rule.loop(), d = rule.loop();
  rule.operands = {concat(ids, {d}), ids};
  rule.results = {{v, d}};
  rule.reductions = {ids};
  return rule;
}

ShardingRule RmsNormBackwardOp::getShardingRule() {
  return rmsNormShardingRule(rankOf(getInput()), /*backward=*/true);
}

ShardingRule LinearBackwardDataOp::getShardingRule() {
  ShardingRule rule;
  Map lead = loops(rule, rankOf(getGrad()) - 1);
  int64_t n = rule.loop(), k = rule.loop();
  rule.operands = {concat(lead, {n}), {n, k}};
  rule.results = {concat(lead, {k})};
  rule.reductions = {{n}};
  return rule;
}

ShardingRule LinearBackwardWeightOp::getShardingRule() {
  ShardingRule rule;
  Map lead = loops(rule, rankOf(getGrad()) - 1);
  int64_t n = rule.loop(), k = rule.loop();
  rule.operands = {concat(lead, {n}), concat(lead, {k})};
  rule.results = {{n, k}};
  rule.reductions = {lead};
  return rule;
}

ShardingRule RopeBackwardOp::getShardingRule() { return ropeRule(); }

ShardingRule AttentionBackwardOp::getShardingRule() {
  ShardingRule rule;
  auto [b, sq, sk, g, d] = attentionLoops(rule);
  Map queries{b, sq, g, d}, keys{b, sk, g, d};
  rule.operands = {queries, queries, keys, keys, queries, {b, g, sq}};
  rule.results = {queries, keys, keys};
  rule.reductions = {{}, {sq}, {sq}};
  return rule;
}

ShardingRule SwigluBackwardOp::getShardingRule() { return elementwise(*this); }

ShardingRule CrossEntropyBackwardOp::getShardingRule() {
  ShardingRule rule;
  Map lead = loops(rule, rankOf(getLabels()));
  int64_t v = rule.loop(); // loss parallel, as kiln.cross_entropy
  rule.operands = {concat(lead, {v}), lead, {}};
  rule.results = {concat(lead, {v})};
  return rule;
}

/// The vocab_parallel ops (loss parallel) run after partitioning, on the
/// rank's vocabulary shard: rows split freely, the shard stays whole.
ShardingRule VocabParallelMaxOp::getShardingRule() {
  ShardingRule rule;
  Map rows = loops(rule, rankOf(getMax()));
  rule.operands = {concat(rows, {rule.loop(false)})};
  rule.results = {rows};
  return rule;
}

ShardingRule VocabParallelStatsOp::getShardingRule() {
  ShardingRule rule;
  Map rows = loops(rule, rankOf(getMax()));
  rule.operands = {concat(rows, {rule.loop(false)}), rows, rows};
  rule.results = {concat(rows, {-1})};
  return rule;
}

ShardingRule VocabParallelLossOp::getShardingRule() {
  ShardingRule rule;
  Map rows = loops(rule, rankOf(getMax()));
  rule.operands = {rows, concat(rows, {-1})};
  rule.results = {{}};
  rule.reductions = {rows};
  return rule;
}

ShardingRule VocabParallelLossBackwardOp::getShardingRule() {
  ShardingRule rule;
  Map rows = loops(rule, rankOf(getMax()));
  Map full = concat(rows, {rule.loop(false)});
  rule.operands = {full, rows, {}, rows, concat(rows, {-1})};
  rule.results = {full};
  return rule;
}

ShardingRule GlobalNormOp::getShardingRule() {
  // Every element of every operand is its own loop: the norm of split
  // operands is assembled from per-rank sums of squares by the partitioner.
  ShardingRule rule;
  Map all;
  for (Value t : getTensors()) {
    rule.operands.push_back(loops(rule, rankOf(t)));
    all.append(rule.operands.back());
  }
  rule.results = {{}};
  rule.reductions = {all};
  return rule;
}

ShardingRule ClipCoefOp::getShardingRule() { return whole(*this); }
ShardingRule LrScheduleOp::getShardingRule() { return whole(*this); }
ShardingRule NextStepOp::getShardingRule() { return whole(*this); }
ShardingRule SqrtOp::getShardingRule() { return elementwise(*this); }

ShardingRule AdamWOp::getShardingRule() {
  ShardingRule rule;
  Map p = loops(rule, rankOf(getParam()));
  rule.operands = {p, p, p, p, {}, {}, {}};
  rule.results = {p, p, p};
  return rule;
}

//===----------------------------------------------------------------------===//
// Mixture of experts
//===----------------------------------------------------------------------===//

/// router / router_backward: tokens split freely; the experts (softmax,
/// top-k) and the k slots stay whole.
static ShardingRule routerRule(Value probs, bool backward, unsigned numOperands) {
  ShardingRule rule;
  Map lead = loops(rule, rankOf(probs) - 1);
  int64_t e = rule.loop(false), k = rule.loop(false);
  Map byExpert = concat(lead, {e}), bySlot = concat(lead, {k});
  if (!backward) { // router: logits (and the expert bias) -> weights, experts, probs
    rule.operands = {byExpert};
    if (numOperands == 2)
      rule.operands.push_back({e});
    rule.results = {bySlot, bySlot, byExpert};
  } else { // router_backward: probs, experts, weights_grad, probs_grad -> logits_grad
    rule.operands = {byExpert, bySlot, bySlot, byExpert};
    rule.results = {byExpert};
  }
  return rule;
}

ShardingRule RouterOp::getShardingRule() { return routerRule(getProbs(), false, getNumOperands()); }
ShardingRule RouterBackwardOp::getShardingRule() { return routerRule(getProbs(), true, getNumOperands()); }

/// grouped_experts and its backward: tokens split freely; each expert's
/// intermediate features split like a dense MLP's (w1/w3 colwise, w2
/// rowwise), leaving the output a partial sum; with `expertParallel` the
/// experts split too (each rank runs its block of them, kiln-partition's
/// expert_axes), the output then summing over them; hidden and the k slots
/// stay whole.
struct ExpertLoops {
  Map lead;
  int64_t h, e, i, k;
};
static ExpertLoops expertLoops(ShardingRule &rule, int64_t inputRank, bool expertParallel,
                               bool blocked) {
  if (blocked) { // the input's first dimension is the experts' loop: rows of
                 // block g meet only block g's experts
    int64_t e = rule.loop(expertParallel);
    Map lead = concat({e}, loops(rule, inputRank - 2));
    int64_t h = rule.loop(false), i = rule.loop(), k = rule.loop(false);
    return {lead, h, e, i, k};
  }
  Map lead = loops(rule, inputRank - 1);
  int64_t h = rule.loop(false), e = rule.loop(expertParallel), i = rule.loop(),
          k = rule.loop(false);
  return {lead, h, e, i, k};
}

ShardingRule kiln::groupedExpertsShardingRule(int64_t inputRank, bool backward,
                                              bool expertParallel, bool blocked) {
  ShardingRule rule;
  auto [lead, h, e, i, k] = expertLoops(rule, inputRank, expertParallel, blocked);
  Map slots = concat(lead, {k}), x = concat(lead, {h});
  // Sums over the experts, unless the tokens' dimension is theirs.
  Map overExperts = blocked ? Map{i} : Map{i, e};
  Map tokens(blocked ? ArrayRef<int64_t>(lead).drop_front() : ArrayRef<int64_t>(lead));
  if (!backward) {
    rule.operands = {x, slots, slots, {e, i, h}, {e, i, h}, {e, h, i}};
    rule.results = {x};
    rule.reductions = {overExperts};
    return rule;
  }
  rule.operands = {x, x, slots, slots, {e, i, h}, {e, i, h}, {e, h, i}};
  rule.results = {x, slots, {e, i, h}, {e, i, h}, {e, h, i}};
  // dx and the routing weights' gradient sum over the intermediate features
  // and the experts; the expert weights' gradients sum over the tokens.
  rule.reductions = {overExperts, overExperts, tokens, tokens, tokens};
  return rule;
}

ShardingRule GroupedExpertsOp::getShardingRule() {
  return groupedExpertsShardingRule(rankOf(getInput()), /*backward=*/false,
                                    /*expertParallel=*/true, getBlocked());
}

ShardingRule GroupedExpertsBackwardOp::getShardingRule() {
  return groupedExpertsShardingRule(rankOf(getInput()), /*backward=*/true,
                                    /*expertParallel=*/true, getBlocked());
}

/// The token dispatcher: the tokens split on their batch dimension (whole
/// rows of chunks), the buffer's chunk dimension with them; its block
/// dimension stays whole (kiln-partition exchanges it for the chunks with an
/// all-to-all before the experts). Other token dimensions, hidden, the k
/// slots and the blocks stay whole.
struct DispatchLoops {
  Map tokens, slots, x, buffer, perRow;
};
static DispatchLoops dispatchLoops(ShardingRule &rule, int64_t tokenRank) {
  int64_t b = rule.loop();
  Map lead = concat({b}, loops(rule, tokenRank - 2, /*canSplit=*/false));
  int64_t h = rule.loop(false), k = rule.loop(false), g = rule.loop(false);
  return {lead, concat(lead, {k}), concat(lead, {h}), {g, b, h}, {g, b, -1}};
}

ShardingRule ExpertDispatchOp::getShardingRule() {
  ShardingRule rule;
  DispatchLoops l = dispatchLoops(rule, rankOf(getExperts()));
  rule.operands = {l.x, l.slots, l.slots};
  rule.results = {l.buffer, l.perRow, l.perRow, l.slots};
  return rule;
}

ShardingRule ExpertCombineOp::getShardingRule() {
  ShardingRule rule;
  DispatchLoops l = dispatchLoops(rule, rankOf(getSlots()));
  rule.operands = {l.slots, l.buffer};
  rule.results = {l.x};
  return rule;
}

ShardingRule ExpertDispatchBackwardOp::getShardingRule() {
  ShardingRule rule;
  DispatchLoops l = dispatchLoops(rule, rankOf(getSlots()));
  rule.operands = {l.slots, l.buffer, l.perRow};
  rule.results = {l.x, l.slots};
  return rule;
}

ShardingRule ExpertCombineBackwardOp::getShardingRule() {
  ShardingRule rule;
  DispatchLoops l = dispatchLoops(rule, rankOf(getSlots()));
  rule.operands = {l.x, l.slots};
  rule.results = {l.buffer};
  return rule;
}

// The loss multiplies two sums over all tokens of all layers: not a sum of
// per-rank parts, so it runs on whole operands.
ShardingRule LoadBalancingLossOp::getShardingRule() { return whole(*this); }
ShardingRule LoadBalancingLossBackwardOp::getShardingRule() { return whole(*this); }
// The bias follows the step's load over every token of every rank.
ShardingRule ExpertBiasUpdateOp::getShardingRule() { return whole(*this); }
ShardingRule ScaleOp::getShardingRule() {
  ShardingRule rule = elementwise(*this);
  rule.sumsPartials = true;
  return rule;
}
