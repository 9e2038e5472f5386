//===- NkiFlashAttention.cpp - nki_flash_attention for kiln.attention -----===//
//
// Flash attention, bound to the NKI Library's attention_cte (forward, with
// its softmax statistics) and attention_bwd: causal, grouped KV heads, in
// [batch, heads, seq, head_dim] with the row log-sum-exp saved for the
// backward; the HLO lowering lays the tensors out as the two functions take
// them. On the CPU, the tiled online-softmax kernels of
// Runtime/FlashAttention: no [seq, seq] scores, masked blocks skipped. Constraints as the NKI
// kernel documents them: head_dim is the partition dimension (at most 128), the sequence is tiled
// in rows of 128 partitions and K/V in tiles of seq_tile_size (2048 by default).
//
//===----------------------------------------------------------------------===//

#include "KernelBase.h"

#include "kiln/Runtime/FlashAttention.h"

#include <cmath>

#include <fmt/core.h>

namespace kiln::kernel_ir {
namespace {

class NkiFlashAttention final : public KernelBase {
public:
  StringRef name() const override { return "nki_flash_attention"; }
  StringRef targetOp() const override { return "kiln.attention"; }
  OpClass opClass() const override { return OpClass::Attention; }
  StringRef summary() const override {
    return "NKI Library attention_cte / attention_bwd: causal, GQA, online softmax";
  }
  StringRef layout() const override {
    return "q [b, heads, s, d], k and v [b, kv_heads, s, d]; lse [b, heads, s]";
  }
  double tolerance(bool bf16) const override { return bf16 ? 2e-2 : 2e-5; }
  std::optional<NeuronKernel> neuron() const override {
    using Source = NkiArgument::Source;
    using Role = NkiResult::Role;
    // attention_cte folds heads into the batch: q (b*h, s, d) (tp_q), k
    // (b*hk, d, s) (not tp_k), v (b*hk, s, d), out (b*h, s, d) (not
    // tp_out); with cache_softmax its softmax statistics, each (b*h, 128,
    // s/128), give Kiln's log-sum-exp. Grouped KV heads are its native GQA
    // (query batch i reads kv batch i / (h / hk)).
    NkiTensorLayout folded{{}, false, true}, kFolded{{0, 1, 3, 2}, false, true},
        stats{{}, true, true};
    NkiBinding forward{
        "nkilib.core.attention.attention_cte",
        "attention_cte",
        {{"q", Source::Operand, 0, folded},
         {"k", Source::Operand, 1, kFolded},
         {"v", Source::Operand, 2, folded}},
        {{"scale", NkiOption{"scale"}},
         {"causal_mask", true},
         {"tp_q", true},
         {"tp_k", false},
         {"tp_out", false},
         {"cache_softmax", true}},
        {{Role::KilnResult, 0, folded}, {Role::NegMax, 1, stats}, {Role::SumRecip, 1, stats}},
        kNkiLibrarySource.str() + "src/nkilib_src/nkilib/core/attention/attention_cte.py"};
    // attention_bwd takes [b, heads, d, s] tensors and lse [b, heads, 128,
    // s/128]; Kiln's backward operands are (dout, q, k, v, out, lse).
    NkiTensorLayout dMajor{{0, 1, 3, 2}, false, false}, lseTiles{{}, true, false};
    NkiBinding backward{"nkilib.core.attention.attention_bwd",
                        "attention_bwd",
                        {{"q_ref", Source::Operand, 1, dMajor},
                         {"k_ref", Source::Operand, 2, dMajor},
                         {"v_ref", Source::Operand, 3, dMajor},
                         {"o_ref", Source::Operand, 4, dMajor},
                         {"dy_ref", Source::Operand, 0, dMajor},
                         {"lse_ref", Source::Operand, 5, lseTiles}},
                        {{"use_causal_mask", true},
                         {"mixed_precision", true},
                         {"softmax_scale", NkiOption{"scale"}}},
                        {{Role::KilnResult, 0, dMajor},
                         {Role::KilnResult, 1, dMajor},
                         {Role::KilnResult, 2, dMajor}},
                        kNkiLibrarySource.str() +
                            "src/nkilib_src/nkilib/core/attention/attention_bwd.py"};
    NeuronKernel kernel{"AwsNeuronCustomNativeKernel",
                        "nkilib.core.attention.attention_cte.attention_cte",
                        "nkilib.core.attention.attention_bwd.attention_bwd"};
    kernel.forwardBinding = std::move(forward);
    kernel.backwardBinding = std::move(backward);
    return kernel;
  }

  std::string unsupportedForm(Operation *op) const override {
    auto attn = cast<AttentionOp>(op);
    if (!attn.getCausal())
      return "it is not causal (the kernel is causal only)";
    // The kernel's mask is the natural causal one on whole sequences.
    if (attn.getHeadTailChunks() || attn.getQueryAxes())
      return "its sequence is split or laid out for context parallelism (the kernel masks "
             "whole sequences in their natural order)";
    return "";
  }

  void checkConstraints(Operation *op, const KernelTarget &target,
                        SmallVectorImpl<std::string> &violations) const override {
    if (!target.isTrainium())
      return;
    // attention_cte's limits on head_dim and seq, and the layout of its
    // softmax statistics: whole tiles of 128 queries. (Its batch, b * heads
    // of a rank, is tested up to 512: a rank's share, not known here.)
    auto q = typeOf(cast<AttentionOp>(op).getQ()); // [b, s, heads, d]
    int64_t seq = q.getDimSize(1), d = q.getDimSize(3);
    if (d > 128)
      violations.push_back("head_dim <= 128 (head_dim = " + std::to_string(d) + ")");
    if (seq % 128 != 0)
      violations.push_back("seq % 128 == 0 (seq = " + std::to_string(seq) + ")");
    if (seq > 131072)
      violations.push_back("seq <= 131072 (seq = " + std::to_string(seq) + ")");
  }

  SmallVector<Value> substitute(OpBuilder &b, Operation *op,
                                const KernelCall &call) const override {
    auto attn = cast<AttentionOp>(op);
    Location loc = op->getLoc();
    Value q = transposed(b, loc, attn.getQ(), kSwapSeqHeads, call.fqn);
    Value k = transposed(b, loc, attn.getK(), kSwapSeqHeads, call.fqn);
    Value v = transposed(b, loc, attn.getV(), kSwapSeqHeads, call.fqn);
    DictionaryAttr options = mergedOptions(
        b, call, {b.getNamedAttr("causal", b.getBoolAttr(attn.getCausal())),
                  b.getNamedAttr("scale", attn.getScaleAttr())});
    Operation *kernel = createForward(b, loc, *this, call, options,
                                      {q.getType(), attn.getLse().getType()}, {q, k, v});
    return {transposed(b, loc, kernel->getResult(0), kSwapSeqHeads, call.fqn),
            kernel->getResult(1)};
  }

  LogicalResult inferResults(Operation *op, bool backward,
                             SmallVectorImpl<Type> &results) const override {
    auto options = op->getAttrOfType<DictionaryAttr>("options");
    if (!options.getAs<FloatAttr>("scale") || !options.getAs<BoolAttr>("causal"))
      return callError(op) << "options must hold 'scale' (f32) and 'causal' (bool)";
    // Backward: (dout, q, k, v, out, lse); forward: (q, k, v).
    unsigned first = backward ? 1 : 0;
    if (failed(expectOperandCount(op, backward ? 6 : 3)) ||
        failed(expectTensor(op, first, "q", 4)) || failed(expectTensor(op, first + 1, "k", 4)) ||
        failed(expectTensor(op, first + 2, "v", 4)))
      return failure();
    auto q = typeOf(op->getOperand(first)), k = typeOf(op->getOperand(first + 1)),
         v = typeOf(op->getOperand(first + 2));
    int64_t heads = q.getDimSize(1), kvHeads = k.getDimSize(1);
    if (k != v || k.getDimSize(0) != q.getDimSize(0) || k.getDimSize(2) != q.getDimSize(2) ||
        k.getDimSize(3) != q.getDimSize(3) || k.getElementType() != q.getElementType() ||
        kvHeads == 0 || heads % kvHeads != 0)
      return callError(op) << "k " << k << " and v " << v << " must match q " << q
                           << " in batch, seq and head_dim, with kv heads dividing the heads";
    auto lse = RankedTensorType::get({q.getDimSize(0), heads, q.getDimSize(2)},
                                     Float32Type::get(op->getContext()));
    if (!backward) {
      results.append({q, lse});
      return success();
    }
    if (op->getOperand(0).getType() != q || op->getOperand(4).getType() != q ||
        op->getOperand(5).getType() != lse)
      return callError(op) << "dout and out must have q's type " << q << " and lse " << lse;
    results.append({q, k, v});
    return success();
  }

  double flops(Operation *op, bool backward) const override {
    auto q = typeOf(op->getOperand(backward ? 1 : 0)); // [b, heads, s, d]
    bool causal = flagOption(op->getAttrOfType<DictionaryAttr>("options"), "causal");
    return attentionFlops(q.getDimSize(0), q.getDimSize(2), q.getDimSize(1), q.getDimSize(3),
                          causal, backward);
  }

  ShardingRule shardingRule(Operation *, bool backward) const override {
    // Query and kv heads split together in whole groups; the causal
    // sequence and head_dim stay whole.
    ShardingRule rule;
    int64_t b = rule.loop(), g = rule.loop(), s = rule.loop(false), d = rule.loop(false);
    SmallVector<int64_t> x{b, g, s, d}, lse{b, g, s};
    if (backward) {
      rule.operands = {x, x, x, x, x, lse};
      rule.results = {x, x, x};
    } else {
      rule.operands = {x, x, x};
      rule.results = {x, lse};
    }
    return rule;
  }

  LogicalResult buildVjp(Operation *forward, OpBuilder &b, ArrayRef<Value> grads,
                         SmallVectorImpl<Value> &operandGrads) const override {
    if (grads[1])
      return callError(forward) << "the log-sum-exp result has a cotangent; it may only feed "
                                   "the kernel's backward";
    Value dout = gradOrZeros(b, forward, grads[0], forward->getResult(0));
    ValueRange in = forward->getOperands();
    Operation *bwd =
        createBackward(b, forward, in.getTypes(),
                       {dout, in[0], in[1], in[2], forward->getResult(0), forward->getResult(1)});
    operandGrads.append(bwd->result_begin(), bwd->result_end());
    return success();
  }
  SmallVector<unsigned> cotangentOperands() const override { return {0}; }

  KernelCheckShape checkShape() const override { return attentionCheckShape(); }
  std::string checkShapeProblem(const KernelCheckShape &s) const override {
    // Grouped-query attention: each key/value head serves a group of heads.
    int64_t heads = dim(s, "heads"), kv = dim(s, "kv_heads");
    return heads % kv ? fmt::format("heads={} is not a multiple of kv_heads={}", heads, kv) : "";
  }
  SmallVector<CheckInput> checkInputs(MLIRContext *context,
                                      const KernelCheckShape &s) const override {
    auto kv = attentionCheckType(context, s, "kv_heads");
    return {{"q", attentionCheckType(context, s, "heads")}, {"k", kv}, {"v", kv}};
  }
  SmallVector<CheckResult> buildReference(OpBuilder &b, Location loc, ValueRange in,
                                                     const KernelCheckShape &s,
                                                     StringAttr fqn) const override {
    float scale = 1.0f / std::sqrt(float(dim(s, "head_dim")));
    auto attn =
        AttentionOp::create(b, loc, in[0], in[1], in[2], b.getUnitAttr(), b.getF32FloatAttr(scale),
                            fqn, DenseI16ArrayAttr(), IntegerAttr());
    return {{attn.getOut(), "out"}, {attn.getLse(), "lse", /*differentiable=*/false}};
  }

  void runForward(DictionaryAttr options, MutableArrayRef<Tensor> in,
                  SmallVectorImpl<Tensor> &out) const override {
    auto [o, lse] = kernels::flashAttention(in[0], in[1], in[2], flagOption(options, "causal"),
                                            floatOption(options, "scale"));
    out.append({o, lse});
  }
  void runBackward(DictionaryAttr options, MutableArrayRef<Tensor> in,
                   SmallVectorImpl<Tensor> &out) const override {
    auto [dq, dk, dv] =
        kernels::flashAttentionBackward(in[0], in[1], in[2], in[3], in[4], in[5],
                                        flagOption(options, "causal"), floatOption(options, "scale"));
    out.append({dq, dk, dv});
  }
};

} // namespace

void registerNkiFlashAttention() { registerKernelSpec(std::make_unique<NkiFlashAttention>()); }

} // namespace kiln::kernel_ir
