//===- KilnOps.td - kiln dialect ops -----------------------*- tablegen -*-===//
//
// Every op: static-shape operands, an `fqn` module path, a shape rule
// (inferReturnTypes, which also rejects malformed operands with a message
// naming the op and its fqn), a cost and, for forward ops, a VJP. Kernels
// are bound by each target, never here.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_OPS_TD
#define KILN_OPS_TD

include "kiln/Dialect/Kiln/IR/KilnDialect.td"
include "kiln/Dialect/Kiln/IR/KilnAttrs.td"
include "kiln/Dialect/Kiln/IR/KilnInterfaces.td"
include "mlir/IR/OpBase.td"
include "mlir/IR/CommonAttrConstraints.td"
include "mlir/IR/CommonTypeConstraints.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/Interfaces/ViewLikeInterface.td"

// Element types are ODS constraints, checked before each op's shape rule;
// captured IR carries each op's fqn as its location, so these messages name
// the module too. Shapes and the relations between operands are the shape
// rules' (inferReturnTypes), whose messages add the fqn themselves.
def Kiln_FloatTensor : RankedTensorOf<[F32, BF16, F16]>;
def Kiln_IdTensor : RankedTensorOf<[I64, I32]>;
def Kiln_F32Tensor : RankedTensorOf<[F32]>;
def Kiln_StepTensor : 0DTensorOf<[I64]>;

// Every kiln op names its module: a non-empty `fqn` (kiln::HasModulePath).
def Kiln_HasModulePath : NativeOpTrait<"HasModulePath"> {
  let cppNamespace = "::kiln";
}

// `sharding`: the ShardingRuleOpInterface methods with a default the op
// overrides (["localize"]).
class Kiln_Op<string mnemonic, list<Trait> traits = [], list<string> sharding = []>
    : Op<Kiln_Dialect, mnemonic, traits # [
        Pure, InferTypeOpAdaptor, Kiln_HasModulePath,
        DeclareOpInterfaceMethods<Kiln_CostOpInterface>,
        DeclareOpInterfaceMethods<Kiln_ShardingRuleOpInterface, sharding>]> {
  let assemblyFormat =
      "operands attr-dict `:` functional-type(operands, results)";
}

// Elementwise ops whose operands and result share one type: ODS verifies the
// match (AllTypesMatch) and infers the result type from it.
class Kiln_ElementwiseOp<string mnemonic, list<string> names, list<Trait> traits = []>
    : Op<Kiln_Dialect, mnemonic, traits # [
        Pure, Kiln_HasModulePath, AllTypesMatch<names>,
        DeclareOpInterfaceMethods<InferTypeOpInterface>,
        DeclareOpInterfaceMethods<Kiln_CostOpInterface>,
        DeclareOpInterfaceMethods<Kiln_ShardingRuleOpInterface>]> {
  let assemblyFormat =
      "operands attr-dict `:` functional-type(operands, results)";
}

def Kiln_EmbeddingOp : Kiln_Op<"embedding", [DeclareOpInterfaceMethods<Kiln_VjpOpInterface>],
                               ["localize"]> {
  let summary = "Token embedding lookup";
  let description = [{
    `result[..., :] = table[ids[...], :]` with table `[vocab, dim]`; ids may
    have any rank. Out-of-range ids are a runtime error.

    With `vocab_axes` (a vocabulary-parallel embedding, set by kiln-partition)
    the table is this rank's block of rows of a table split over those grid
    axes (the rank's block index along them times the table's rows is its
    first id); ids held by other ranks give zero rows, so the results of the
    ranks sum to the whole lookup.

    Example:

    ```mlir
    %h = kiln.embedding %table, %ids {fqn = "tok_embeddings"}
        : (tensor<151936x1024xf32>, tensor<2x128xi64>) -> tensor<2x128x1024xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$table, Kiln_IdTensor:$ids, StrAttr:$fqn,
                       OptionalAttr<DenseI16ArrayAttr>:$vocab_axes);
  let results = (outs Kiln_FloatTensor:$result);
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    int64_t getBytesRead();
  }];
}

def Kiln_RmsNormOp : Kiln_Op<"rms_norm", [DeclareOpInterfaceMethods<Kiln_VjpOpInterface>]> {
  let summary = "RMSNorm over the last dimension";
  let description = [{
    `x * rsqrt(mean(x^2, -1) + eps) * weight`, weight `[dim]` where dim is the
    last dimension of x. Used for the block norms and for Qwen3's per-head
    q_norm/k_norm (x `[b, s, heads, head_dim]`, weight `[head_dim]`).

    Example:

    ```mlir
    %x = kiln.rms_norm %h, %w {eps = 1.0e-6 : f32, fqn = "layers.0.attention_norm"}
        : (tensor<2x128x1024xf32>, tensor<1024xf32>) -> tensor<2x128x1024xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$input, Kiln_FloatTensor:$weight,
                       F32Attr:$eps, StrAttr:$fqn);
  let results = (outs Kiln_FloatTensor:$result);
  let hasVerifier = 1;
}

def Kiln_LinearOp : Kiln_Op<"linear", [DeclareOpInterfaceMethods<Kiln_VjpOpInterface>]> {
  let summary = "x @ weight^T with weight in the Hugging Face [out, in] layout";
  let description = [{
    Example:

    ```mlir
    %q = kiln.linear %x, %wq {fqn = "layers.0.attention.wq"}
        : (tensor<2x128x1024xf32>, tensor<2048x1024xf32>) -> tensor<2x128x2048xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$input, Kiln_FloatTensor:$weight, StrAttr:$fqn);
  let results = (outs Kiln_FloatTensor:$result);
  let extraClassDeclaration = Kiln_GemmOp;
}

def Kiln_RopeCacheOp : Kiln_Op<"rope_cache", [DeclareOpInterfaceMethods<Kiln_VjpOpInterface>]> {
  let summary = "RoPE cos/sin table for positions 0..seq_len-1";
  let description = [{
    Result `[seq_len, 2 * head_dim]` in f32: columns `[0, head_dim)` hold
    cos(pos * inv_freq) and `[head_dim, 2 * head_dim)` hold sin, with
    `inv_freq[i] = theta^(-2i/head_dim)` repeated twice along head_dim (the
    Hugging Face / torchtitan rotate-half layout). With `llama3_scaling =
    array<f64: factor, low_freq_factor, high_freq_factor,
    original_max_position_embeddings>`, the frequencies are scaled as Llama 3's
    `rope_scaling` (`rope_type` "llama3") scales them. With
    `head_tail_chunks` (context parallelism's load balancing, as
    kiln.attention's), row i holds the true position of row i of the
    head-tail layout.

    Example:

    ```mlir
    %cache = kiln.rope_cache {theta = 1.0e6 : f64, seq_len = 128 : i64,
                              head_dim = 128 : i64, fqn = "rope_cache"} : tensor<128x256xf32>
    ```
  }];
  let arguments = (ins F64Attr:$theta, I64Attr:$seq_len, I64Attr:$head_dim,
                       StrAttr:$fqn, OptionalAttr<DenseF64ArrayAttr>:$llama3_scaling,
                       OptionalAttr<I64Attr>:$head_tail_chunks);
  let results = (outs Kiln_F32Tensor:$result);
  let extraClassDeclaration = [{
    /// inv_freq of each rotated pair, scaled when llama3_scaling is set.
    std::vector<float> getInverseFrequencies();
  }];
  let assemblyFormat = "attr-dict `:` type($result)";
}

def Kiln_RopeOp : Kiln_Op<"rope", [DeclareOpInterfaceMethods<Kiln_VjpOpInterface>]> {
  let summary = "Rotary position embedding of queries and keys";
  let description = [{
    `x * cos + rotate_half(x) * sin` for q `[b, s, heads, head_dim]` and k
    `[b, s, kv_heads, head_dim]`, `rotate_half(x) = cat(-x[d/2:], x[:d/2])`,
    cache `[s, 2 * head_dim]` as produced by kiln.rope_cache. One op for both
    so that an override of the module `...attention.rope` claims one node.

    Example:

    ```mlir
    %qr, %kr = kiln.rope %q, %k, %cache {fqn = "layers.0.attention.rope"}
        : (tensor<2x128x16x128xf32>, tensor<2x128x8x128xf32>, tensor<128x256xf32>)
        -> (tensor<2x128x16x128xf32>, tensor<2x128x8x128xf32>)
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$q, Kiln_FloatTensor:$k,
                       Kiln_F32Tensor:$cache, StrAttr:$fqn);
  let results = (outs Kiln_FloatTensor:$q_out, Kiln_FloatTensor:$k_out);
}

def Kiln_AttentionOp : Kiln_Op<"attention", [DeclareOpInterfaceMethods<Kiln_VjpOpInterface>],
                                ["localize"]> {
  let summary = "Scaled dot-product attention with grouped KV heads";
  let description = [{
    q `[b, s_q, heads, head_dim]`, k and v `[b, s, kv_heads, head_dim]`;
    query head h reads kv head `h / (heads / kv_heads)` without repeating K/V
    in memory. `softmax(scale * q k^T + causal mask) v` gives `out` with q's
    shape; `lse [b, heads, s_q]` (f32) is the log-sum-exp of each softmax row,
    saved for the backward pass.

    Context parallelism: the causal mask compares true positions.
    `head_tail_chunks` = n says the sequence dimension is laid out in
    torchtitan's head-tail order (its 2 x cp chunks, layout chunk 2r holding
    chunk r and 2r + 1 chunk n - 1 - r, so that rank r of cp holds a head and
    a tail chunk and every rank scores the same number of pairs).
    `query_axes` (set by kiln-partition) says q is this rank's block of the
    sequence split over those grid axes while k and v are whole (all-gathered):
    its rows start at the rank's block index along them times s_q.

    Example:

    ```mlir
    %o, %lse = kiln.attention %q, %k, %v {causal, scale = 0.0884 : f32,
                                         fqn = "layers.0.attention.inner_attention"}
        : (tensor<2x128x16x128xf32>, tensor<2x128x8x128xf32>, tensor<2x128x8x128xf32>)
        -> (tensor<2x128x16x128xf32>, tensor<2x16x128xf32>)
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$q, Kiln_FloatTensor:$k, Kiln_FloatTensor:$v,
                       UnitAttr:$causal, F32Attr:$scale, StrAttr:$fqn,
                       OptionalAttr<DenseI16ArrayAttr>:$query_axes,
                       OptionalAttr<I64Attr>:$head_tail_chunks);
  let results = (outs Kiln_FloatTensor:$out, Kiln_F32Tensor:$lse);
  let extraClassDeclaration = Kiln_AttentionClass;
  let hasVerifier = 1;
}

def Kiln_SwigluOp : Kiln_ElementwiseOp<"swiglu", ["gate", "up", "result"], [
    DeclareOpInterfaceMethods<Kiln_VjpOpInterface>]> {
  let summary = "silu(gate) * up";
  let description = [{
    Example:

    ```mlir
    %a = kiln.swiglu %gate, %up {fqn = "layers.0.feed_forward.swiglu"}
        : (tensor<2x128x3072xf32>, tensor<2x128x3072xf32>) -> tensor<2x128x3072xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$gate, Kiln_FloatTensor:$up, StrAttr:$fqn);
  let results = (outs Kiln_FloatTensor:$result);
}

def Kiln_AddOp : Kiln_ElementwiseOp<"add", ["lhs", "rhs", "result"], [
    DeclareOpInterfaceMethods<Kiln_VjpOpInterface>,
    DeclareOpInterfaceMethods<Kiln_TiedOperandOpInterface>]> {
  let summary = "Elementwise sum of two tensors of one type (residuals)";
  let description = [{
    The sum may overwrite `lhs` when `lhs` dies here (the residual stream).
    Adding a zero constant folds to the other operand.

    Example:

    ```mlir
    %h2 = kiln.add %h, %attn {fqn = "layers.0.attention_residual"}
        : (tensor<2x128x1024xf32>, tensor<2x128x1024xf32>) -> tensor<2x128x1024xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$lhs, Kiln_FloatTensor:$rhs, StrAttr:$fqn);
  let results = (outs Kiln_FloatTensor:$result);
  let hasFolder = 1;
}

def Kiln_CastOp : Kiln_ElementwiseOp<"cast", ["input", "result"], [
    DeclareOpInterfaceMethods<Kiln_VjpOpInterface>]> {
  let summary = "Round a float32 tensor to a narrower float type, kept as float32";
  let description = [{
    Mixed precision (kiln-mixed-precision): each element rounded to `to`
    (round to nearest even; NaN stays NaN, overflow becomes inf) and held in
    the operand's float32 type, so every kernel keeps computing in float32 on
    values that are exactly representable in `to`. The HLO lowering emits
    the narrowing `convert` (and the widening one its float32 consumers
    need), which is where bf16 tensors appear. The cotangent of a narrow
    value is narrow too (FSDP2's bf16 gradients): the VJP rounds it the same
    way.

    Example:

    ```mlir
    %xb = kiln.cast %x {to = bf16, fqn = "layers.0.attention.wq"}
        : (tensor<2x128x1024xf32>) -> tensor<2x128x1024xf32>
    ```
  }];
  let arguments = (ins Kiln_F32Tensor:$input, TypeAttrOf<AnyTypeOf<[BF16, F16]>>:$to,
                       StrAttr:$fqn);
  let results = (outs Kiln_F32Tensor:$result);
}

def Kiln_CrossEntropyOp : Kiln_Op<"cross_entropy",
                                  [DeclareOpInterfaceMethods<Kiln_VjpOpInterface>], ["localize"]> {
  let summary = "Mean cross-entropy of logits against integer labels";
  let description = [{
    logits `[..., vocab]`, labels with logits' leading shape; the result is the
    f32 scalar mean over all label positions of `logsumexp(row) - row[label]`.
    With `total_positions` (a rank's share of a batch split across ranks) the
    sum is divided by that global count instead, so the ranks' results sum to
    the global mean.

    Example:

    ```mlir
    %loss = kiln.cross_entropy %logits, %labels {fqn = "loss"}
        : (tensor<2x128x151936xf32>, tensor<2x128xi64>) -> tensor<f32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$logits, Kiln_IdTensor:$labels, StrAttr:$fqn,
                       OptionalAttr<I64Attr>:$total_positions);
  let results = (outs 0DTensorOf<[F32]>:$loss);
}

def Kiln_ReshapeOp : Kiln_Op<"reshape", [DeclareOpInterfaceMethods<Kiln_VjpOpInterface>,
                                          DeclareOpInterfaceMethods<ViewLikeOpInterface>],
                             ["localize"]> {
  let summary = "Row-major reshape to a static shape with the same element count";
  let description = [{
    A view: the result shares the input's buffer (ViewLikeOpInterface).

    Example:

    ```mlir
    %q4 = kiln.reshape %q {shape = array<i64: 2, 128, 16, 128>,
                         fqn = "layers.0.attention.q_heads"}
        : (tensor<2x128x2048xf32>) -> tensor<2x128x16x128xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input, DenseI64ArrayAttr:$shape, StrAttr:$fqn);
  let results = (outs AnyRankedTensor:$result);
  let extraClassDeclaration = [{
    int64_t getBytesRead();
    int64_t getBytesWritten();
  }];
}

def Kiln_PadOp : Kiln_Op<"pad"> {
  let summary = "Zero-pads one dimension at its end to `size` entries";
  let description = [{
    The uneven FSDP2 shards of a per-rank program: a gradient is padded to a
    multiple of the shard degree before it is reduce-scattered.

    Example:

    ```mlir
    %p = kiln.pad %g {dim = 0 : i64, size = 9 : i64, fqn = "norm"}
        : (tensor<8xf32>) -> tensor<9xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$input, I64Attr:$dim, I64Attr:$size, StrAttr:$fqn);
  let results = (outs Kiln_FloatTensor:$result);
}

def Kiln_NarrowOp : Kiln_Op<"narrow"> {
  let summary = "The first `size` entries of one dimension";
  let description = [{
    Drops the padding of an uneven FSDP2 shard after its all-gather.

    Example:

    ```mlir
    %w = kiln.narrow %gathered {dim = 0 : i64, size = 8 : i64, fqn = "norm"}
        : (tensor<9xf32>) -> tensor<8xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$input, I64Attr:$dim, I64Attr:$size, StrAttr:$fqn);
  let results = (outs Kiln_FloatTensor:$result);
}

include "kiln/Dialect/Kiln/IR/KilnBackwardOps.td"
include "kiln/Dialect/Kiln/IR/KilnMoeOps.td"
include "kiln/Dialect/Kiln/IR/KilnExpertDispatchOps.td"
include "kiln/Dialect/Kiln/IR/KilnOptimizerOps.td"
include "kiln/Dialect/Kiln/IR/KilnVocabParallelOps.td"
include "kiln/Dialect/Kiln/IR/KilnKernelOps.td"

#endif // KILN_OPS_TD
