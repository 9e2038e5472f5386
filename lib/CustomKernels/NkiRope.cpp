//===- NkiRope.cpp - nki_rope: NKI's rope_hf in place of kiln.rope --------===//
//
// The seeds' RoPE kernel, the NKI Library's rope_hf: the Hugging Face
// rotate-half rotation of q and k in its [batch, heads, seq, head_dim]
// layout, so the substitution transposes q and k in and the results back
// out. Both directions call rope_hf (backward=True rotates the other way),
// its outputs passed in as buffers the results alias, Kiln's [seq, 2d]
// cache as its packed rope_cache (cos, then sin). Its CPU implementation
// does kiln.rope's arithmetic element for element: in f32 it matches the
// replaced op exactly.
//
//===----------------------------------------------------------------------===//

#include "KernelBase.h"

#include "kiln/Runtime/BackwardKernels.h"
#include "kiln/Runtime/ForwardKernels.h"

#include <fmt/core.h>

namespace kiln::kernel_ir {
namespace {

class NkiRope final : public KernelBase {
public:
  StringRef name() const override { return "nki_rope"; }
  StringRef targetOp() const override { return "kiln.rope"; }
  OpClass opClass() const override { return OpClass::Vector; }
  StringRef summary() const override {
    return "NKI Library rope_hf (backward=True for the VJP): rotate-half RoPE of q and k";
  }
  StringRef layout() const override {
    return "q [b, heads, s, d], k [b, kv_heads, s, d], cache [s, 2d]";
  }
  double tolerance(bool bf16) const override { return bf16 ? 1e-2 : 0.0; }
  std::optional<NeuronKernel> neuron() const override {
    // Forward (q, k, cache) and backward (dq_out, dk_out, cache) take the
    // same arguments: rope_hf(q, k, q_out, k_out, rope_cache=, backward=).
    auto ropeHf = [](bool backward) {
      using Source = NkiArgument::Source;
      return NkiBinding{"nkilib.core.embeddings.rope_hf",
                        "rope_hf",
                        {{"q", Source::Operand, 0},
                         {"k", Source::Operand, 1},
                         {"q_out", Source::OutputBuffer, 0},
                         {"k_out", Source::OutputBuffer, 1},
                         {"rope_cache", Source::Operand, 2}},
                        {{"backward", backward}},
                        /*results: Kiln's, in the output buffers*/ {},
                        kNkiLibrarySource.str() +
                            "src/nkilib_src/nkilib/core/embeddings/rope_hf.py"};
    };
    NeuronKernel kernel{"AwsNeuronCustomNativeKernel", "nkilib.core.embeddings.rope_hf.rope_hf",
                        "nkilib.core.embeddings.rope_hf.rope_hf(backward=True)"};
    kernel.forwardBinding = ropeHf(false);
    kernel.backwardBinding = ropeHf(true);
    return kernel;
  }

  void checkConstraints(Operation *op, const KernelTarget &target,
                        SmallVectorImpl<std::string> &violations) const override {
    if (!target.isTrainium())
      return;
    // rope_hf tiles the sequence over the 128 partitions of each physical
    // core of the logical one.
    int64_t seq = typeOf(cast<RopeOp>(op).getQ()).getDimSize(1), tile = 128 * target.lnc;
    if (seq % tile != 0)
      violations.push_back("seq % (128 * lnc) == 0 (seq = " + std::to_string(seq) +
                           ", 128 * lnc = " + std::to_string(tile) + ")");
  }

  SmallVector<Value> substitute(OpBuilder &b, Operation *op,
                                const KernelCall &call) const override {
    auto rope = cast<RopeOp>(op);
    Location loc = op->getLoc();
    Value q = transposed(b, loc, rope.getQ(), kSwapSeqHeads, call.fqn);
    Value k = transposed(b, loc, rope.getK(), kSwapSeqHeads, call.fqn);
    Operation *kernel = createForward(b, loc, *this, call, mergedOptions(b, call, {}),
                                      {q.getType(), k.getType()}, {q, k, rope.getCache()});
    return {transposed(b, loc, kernel->getResult(0), kSwapSeqHeads, call.fqn),
            transposed(b, loc, kernel->getResult(1), kSwapSeqHeads, call.fqn)};
  }

  LogicalResult inferResults(Operation *op, bool, SmallVectorImpl<Type> &results) const override {
    // Forward (q, k, cache) and backward (dq_out, dk_out, cache) alike.
    if (failed(expectOperandCount(op, 3)) || failed(expectTensor(op, 0, "q", 4)) ||
        failed(expectTensor(op, 1, "k", 4)) || failed(expectTensor(op, 2, "cache", 2, true)))
      return failure();
    auto q = typeOf(op->getOperand(0)), k = typeOf(op->getOperand(1)),
         cache = typeOf(op->getOperand(2));
    int64_t seq = q.getDimSize(2), d = q.getDimSize(3);
    if (k.getDimSize(0) != q.getDimSize(0) || k.getDimSize(2) != seq || k.getDimSize(3) != d ||
        k.getElementType() != q.getElementType())
      return callError(op) << "k " << k << " does not match q " << q
                           << " in batch, seq, head_dim or element type";
    if (d % 2 != 0 || cache.getDimSize(0) != seq || cache.getDimSize(1) != 2 * d)
      return callError(op) << "cache " << cache << " must be [seq, 2 * head_dim] = [" << seq
                           << ", " << 2 * d << "] with an even head_dim";
    results.append({q, k});
    return success();
  }

  double flops(Operation *op, bool) const override {
    return 3.0 * (typeOf(op->getOperand(0)).getNumElements() +
                typeOf(op->getOperand(1)).getNumElements());
  }

  ShardingRule shardingRule(Operation *, bool) const override {
    ShardingRule rule;
    int64_t b = rule.loop(), h = rule.loop(), hk = rule.loop(), s = rule.loop(),
            d = rule.loop(false);
    rule.operands = {{b, h, s, d}, {b, hk, s, d}, {s, -1}};
    rule.results = {{b, h, s, d}, {b, hk, s, d}};
    return rule;
  }

  LogicalResult buildVjp(Operation *forward, OpBuilder &b, ArrayRef<Value> grads,
                         SmallVectorImpl<Value> &operandGrads) const override {
    Value dq = gradOrZeros(b, forward, grads[0], forward->getResult(0));
    Value dk = gradOrZeros(b, forward, grads[1], forward->getResult(1));
    Operation *bwd = createBackward(b, forward, {dq.getType(), dk.getType()},
                                    {dq, dk, forward->getOperand(2)});
    operandGrads.append({bwd->getResult(0), bwd->getResult(1), nullptr});
    return success();
  }
  SmallVector<unsigned> cotangentOperands() const override { return {0, 1}; }

  KernelCheckShape checkShape() const override { return attentionCheckShape(); }
  std::string checkShapeProblem(const KernelCheckShape &s) const override {
    // The rotation pairs the two halves of each head.
    int64_t d = dim(s, "head_dim");
    return d % 2 ? fmt::format("head_dim={} is odd: rope rotates pairs of halves", d) : "";
  }
  SmallVector<CheckInput> checkInputs(MLIRContext *context,
                                      const KernelCheckShape &s) const override {
    return {{"q", attentionCheckType(context, s, "heads")},
            {"k", attentionCheckType(context, s, "kv_heads")}};
  }
  SmallVector<CheckResult> buildReference(OpBuilder &b, Location loc, ValueRange in,
                                                     const KernelCheckShape &s,
                                                     StringAttr fqn) const override {
    int64_t seq = dim(s, "seq"), d = dim(s, "head_dim");
    Value cache = RopeCacheOp::create(b, loc, b.getF64FloatAttr(1e6), b.getI64IntegerAttr(seq),
                                      b.getI64IntegerAttr(d), b.getStringAttr("rope_cache"),
                                      /*llama3_scaling=*/nullptr,
                                      /*head_tail_chunks=*/nullptr);
    auto rope = RopeOp::create(b, loc, in[0], in[1], cache, fqn);
    return {{rope.getQOut(), "q_out"}, {rope.getKOut(), "k_out"}};
  }

  void runForward(DictionaryAttr, MutableArrayRef<Tensor> in,
                  SmallVectorImpl<Tensor> &out) const override {
    out.push_back(kernels::ropeRotate(in[0], in[2], /*transpose=*/false, /*headsFirst=*/true));
    out.push_back(kernels::ropeRotate(in[1], in[2], false, true));
  }
  void runBackward(DictionaryAttr, MutableArrayRef<Tensor> in,
                   SmallVectorImpl<Tensor> &out) const override {
    out.push_back(kernels::ropeRotate(in[0], in[2], /*transpose=*/true, /*headsFirst=*/true));
    out.push_back(kernels::ropeRotate(in[1], in[2], true, true));
  }
};

} // namespace

void registerNkiRope() { registerKernelSpec(std::make_unique<NkiRope>()); }

} // namespace kiln::kernel_ir
