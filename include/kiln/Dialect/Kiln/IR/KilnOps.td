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

// Operands are only required to be ranked tensors here; the element types
// (floats: f32/bf16/f16, ids: i64/i32) are checked by each op's shape rule so
// that the message names the op's fqn. The names document the intent.
defvar Kiln_FloatTensor = AnyRankedTensor;
defvar Kiln_IdTensor = AnyRankedTensor;
defvar Kiln_F32Tensor = AnyRankedTensor;

class Kiln_Op<string mnemonic, list<Trait> traits = []>
    : Op<Kiln_Dialect, mnemonic, traits # [
        Pure, InferTypeOpAdaptor,
        DeclareOpInterfaceMethods<Kiln_CostOpInterface>]> {
  let assemblyFormat =
      "operands attr-dict `:` functional-type(operands, results)";
}

def Kiln_EmbeddingOp : Kiln_Op<"embedding", [DeclareOpInterfaceMethods<Kiln_VjpOpInterface>]> {
  let summary = "Token embedding lookup";
  let description = [{
    `result[..., :] = table[ids[...], :]` with table `[vocab, dim]`; ids may
    have any rank. Out-of-range ids are a runtime error.
  }];
  let arguments = (ins Kiln_FloatTensor:$table, Kiln_IdTensor:$ids, StrAttr:$fqn);
  let results = (outs Kiln_FloatTensor:$result);
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
  }];
  let arguments = (ins Kiln_FloatTensor:$input, Kiln_FloatTensor:$weight,
                       F32Attr:$eps, StrAttr:$fqn);
  let results = (outs Kiln_FloatTensor:$result);
  let hasVerifier = 1;
}

def Kiln_LinearOp : Kiln_Op<"linear", [DeclareOpInterfaceMethods<Kiln_VjpOpInterface>]> {
  let summary = "x @ weight^T with weight in the Hugging Face [out, in] layout";
  let arguments = (ins Kiln_FloatTensor:$input, Kiln_FloatTensor:$weight, StrAttr:$fqn);
  let results = (outs Kiln_FloatTensor:$result);
}

def Kiln_RopeCacheOp : Kiln_Op<"rope_cache", [DeclareOpInterfaceMethods<Kiln_VjpOpInterface>]> {
  let summary = "RoPE cos/sin table for positions 0..seq_len-1";
  let description = [{
    Result `[seq_len, 2 * head_dim]` in f32: columns `[0, head_dim)` hold
    cos(pos * inv_freq) and `[head_dim, 2 * head_dim)` hold sin, with
    `inv_freq[i] = theta^(-2i/head_dim)` repeated twice along head_dim (the
    Hugging Face / torchtitan rotate-half layout).
  }];
  let arguments = (ins F64Attr:$theta, I64Attr:$seq_len, I64Attr:$head_dim,
                       StrAttr:$fqn);
  let results = (outs Kiln_F32Tensor:$result);
  let assemblyFormat = "attr-dict `:` type($result)";
}

def Kiln_RopeOp : Kiln_Op<"rope", [DeclareOpInterfaceMethods<Kiln_VjpOpInterface>]> {
  let summary = "Rotary position embedding of queries and keys";
  let description = [{
    `x * cos + rotate_half(x) * sin` for q `[b, s, heads, head_dim]` and k
    `[b, s, kv_heads, head_dim]`, `rotate_half(x) = cat(-x[d/2:], x[:d/2])`,
    cache `[s, 2 * head_dim]` as produced by kiln.rope_cache. One op for both
    so that an override of the module `...attention.rope` claims one node.
  }];
  let arguments = (ins Kiln_FloatTensor:$q, Kiln_FloatTensor:$k,
                       Kiln_F32Tensor:$cache, StrAttr:$fqn);
  let results = (outs Kiln_FloatTensor:$q_out, Kiln_FloatTensor:$k_out);
}

def Kiln_AttentionOp : Kiln_Op<"attention", [DeclareOpInterfaceMethods<Kiln_VjpOpInterface>]> {
  let summary = "Scaled dot-product attention with grouped KV heads";
  let description = [{
    q `[b, s, heads, head_dim]`, k and v `[b, s, kv_heads, head_dim]`;
    query head h reads kv head `h / (heads / kv_heads)` without repeating K/V
    in memory. `softmax(scale * q k^T + causal mask) v` gives `out` with q's
    shape; `lse [b, heads, s]` (f32) is the log-sum-exp of each softmax row,
    saved for the backward pass.
  }];
  let arguments = (ins Kiln_FloatTensor:$q, Kiln_FloatTensor:$k, Kiln_FloatTensor:$v,
                       UnitAttr:$causal, F32Attr:$scale, StrAttr:$fqn);
  let results = (outs Kiln_FloatTensor:$out, Kiln_F32Tensor:$lse);
}

def Kiln_SwigluOp : Kiln_Op<"swiglu", [DeclareOpInterfaceMethods<Kiln_VjpOpInterface>]> {
  let summary = "silu(gate) * up";
  let arguments = (ins Kiln_FloatTensor:$gate, Kiln_FloatTensor:$up, StrAttr:$fqn);
  let results = (outs Kiln_FloatTensor:$result);
}

def Kiln_AddOp : Kiln_Op<"add", [DeclareOpInterfaceMethods<Kiln_VjpOpInterface>,
                                  DeclareOpInterfaceMethods<Kiln_TiedOperandOpInterface>]> {
  let summary = "Elementwise sum of two tensors of one type (residuals)";
  let description = [{
    The sum may overwrite `lhs` when `lhs` dies here (the residual stream).
    Adding a zero constant folds to the other operand.
  }];
  let arguments = (ins Kiln_FloatTensor:$lhs, Kiln_FloatTensor:$rhs, StrAttr:$fqn);
  let results = (outs Kiln_FloatTensor:$result);
  let hasFolder = 1;
}

def Kiln_CrossEntropyOp : Kiln_Op<"cross_entropy", [DeclareOpInterfaceMethods<Kiln_VjpOpInterface>]> {
  let summary = "Mean cross-entropy of logits against integer labels";
  let description = [{
    logits `[..., vocab]`, labels with logits' leading shape; the result is the
    f32 scalar mean over all label positions of `logsumexp(row) - row[label]`.
  }];
  let arguments = (ins Kiln_FloatTensor:$logits, Kiln_IdTensor:$labels, StrAttr:$fqn);
  let results = (outs 0DTensorOf<[F32]>:$loss);
}

def Kiln_ReshapeOp : Kiln_Op<"reshape", [DeclareOpInterfaceMethods<Kiln_VjpOpInterface>,
                                          DeclareOpInterfaceMethods<ViewLikeOpInterface>]> {
  let summary = "Row-major reshape to a static shape with the same element count";
  let description = [{
    A view: the result shares the input's buffer (ViewLikeOpInterface).
  }];
  let arguments = (ins AnyRankedTensor:$input, DenseI64ArrayAttr:$shape, StrAttr:$fqn);
  let results = (outs AnyRankedTensor:$result);
  let extraClassDeclaration = [{
    int64_t getBytesRead();
    int64_t getBytesWritten();
  }];
}

include "kiln/Dialect/Kiln/IR/KilnBackwardOps.td"
include "kiln/Dialect/Kiln/IR/KilnOptimizerOps.td"

#endif // KILN_OPS_TD
