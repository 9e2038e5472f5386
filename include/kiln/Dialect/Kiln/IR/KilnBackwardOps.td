//===- KilnBackwardOps.td - Named backward ops -------------*- tablegen -*-===//
//
// Backward kernels in their own right, emitted by the forward ops' VJPs.
// They keep the forward op's fqn (they belong to the same module), read the
// saved forward values they need, and have the same shape rule / cost / CPU
// kernel obligations as every kiln op. Included from KilnOps.td.
//
//===----------------------------------------------------------------------===//

// A backward op; `cotangents` names the accessors of the operands that carry
// cotangents (BackwardOpInterface), so a zero cotangent folds the op away.
class Kiln_BackwardOp<string mnemonic, list<string> cotangents, list<Trait> traits = [],
                      list<string> sharding = []>
    : Kiln_Op<mnemonic, traits # [DeclareOpInterfaceMethods<Kiln_BackwardOpInterface>],
              sharding> {
  let extraClassDefinition = [{
    ::llvm::SmallVector<::mlir::Value> $cppClass::getCotangents() {
      return {}] # !interleave(!foreach(name, cotangents, name # "()"), ", ") # [{};
    }
  }];
}

def Kiln_ConstantOp : Kiln_Op<"constant", [DeclareOpInterfaceMethods<Kiln_VjpOpInterface>]> {
  let summary = "A splat float constant (e.g. the loss seed gradient 1.0)";
  let description = [{
    A leaf for autodiff: a constant in the loss simply has no gradient.

    Example:

    ```mlir
    %seed = kiln.constant {fqn = "loss.seed_grad", value = dense<1.0> : tensor<f32>} : tensor<f32>
    ```
  }];
  let arguments = (ins ElementsAttr:$value, StrAttr:$fqn);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat = "attr-dict `:` type($result)";
}

def Kiln_EmbeddingBackwardOp : Kiln_BackwardOp<"embedding_backward", ["getGrad"], [],
                                               ["localize"]> {
  let summary = "Scatter-add of output gradients into the embedding table's gradient";
  let description = [{
    With `vocab_axes` the result is this rank's block of `vocab_size` rows of
    the gradient of a table split over those axes (see kiln.embedding); ids
    held by other ranks contribute nothing.

    Example:

    ```mlir
    %dtable = kiln.embedding_backward %dh, %ids {fqn = "tok_embeddings", vocab_size = 151936 : i64}
        : (tensor<2x128x1024xf32>, tensor<2x128xi64>) -> tensor<151936x1024xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$grad, Kiln_IdTensor:$ids, I64Attr:$vocab_size,
                       StrAttr:$fqn, OptionalAttr<DenseI16ArrayAttr>:$vocab_axes);
  let results = (outs Kiln_FloatTensor:$table_grad);
  let hasVerifier = 1;
}

def Kiln_RmsNormBackwardOp : Kiln_BackwardOp<"rms_norm_backward", ["getGrad"]> {
  let summary = "Gradients of rms_norm with respect to its input and weight";
  let description = [{
    Example:

    ```mlir
    %dx, %dw = kiln.rms_norm_backward %dy, %x, %w {eps = 1.0e-6 : f32, fqn = "norm"}
        : (tensor<2x128x1024xf32>, tensor<2x128x1024xf32>, tensor<1024xf32>)
        -> (tensor<2x128x1024xf32>, tensor<1024xf32>)
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$grad, Kiln_FloatTensor:$input,
                       Kiln_FloatTensor:$weight, F32Attr:$eps, StrAttr:$fqn);
  let results = (outs Kiln_FloatTensor:$input_grad, Kiln_FloatTensor:$weight_grad);
}

def Kiln_LinearBackwardDataOp : Kiln_BackwardOp<"linear_backward_data", ["getGrad"]> {
  let summary = "grad @ weight: the input gradient of linear";
  let description = [{
    Example:

    ```mlir
    %dx = kiln.linear_backward_data %dq, %wq {fqn = "layers.0.attention.wq"}
        : (tensor<2x128x2048xf32>, tensor<2048x1024xf32>) -> tensor<2x128x1024xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$grad, Kiln_FloatTensor:$weight, StrAttr:$fqn);
  let results = (outs Kiln_FloatTensor:$input_grad);
  let extraClassDeclaration = Kiln_GemmOp;
}

def Kiln_LinearBackwardWeightOp : Kiln_BackwardOp<"linear_backward_weight", ["getGrad"]> {
  let summary = "grad^T @ input summed over leading dims: the weight gradient of linear";
  let description = [{
    Example:

    ```mlir
    %dwq = kiln.linear_backward_weight %dq, %x {fqn = "layers.0.attention.wq"}
        : (tensor<2x128x2048xf32>, tensor<2x128x1024xf32>) -> tensor<2048x1024xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$grad, Kiln_FloatTensor:$input, StrAttr:$fqn);
  let results = (outs Kiln_FloatTensor:$weight_grad);
  let extraClassDeclaration = Kiln_GemmOp;
}

def Kiln_RopeBackwardOp : Kiln_BackwardOp<"rope_backward", ["getQGrad", "getKGrad"]> {
  let summary = "Gradients of rope: the inverse rotation of the q and k gradients";
  let description = [{
    Example:

    ```mlir
    %dq, %dk = kiln.rope_backward %dqr, %dkr, %cache {fqn = "layers.0.attention.rope"}
        : (tensor<2x128x16x128xf32>, tensor<2x128x8x128xf32>, tensor<128x256xf32>)
        -> (tensor<2x128x16x128xf32>, tensor<2x128x8x128xf32>)
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$q_grad, Kiln_FloatTensor:$k_grad,
                       Kiln_F32Tensor:$cache, StrAttr:$fqn);
  let results = (outs Kiln_FloatTensor:$q_input_grad, Kiln_FloatTensor:$k_input_grad);
}

def Kiln_AttentionBackwardOp : Kiln_BackwardOp<"attention_backward", ["getOutGrad"], [],
                                                ["localize"]> {
  let summary = "Gradients of attention from the saved q, k, v, output and log-sum-exp";
  let description = [{
    Recomputes the softmax from the saved `lse` (no [s, s] probabilities are
    kept between forward and backward). GQA: the k and v gradients sum over
    the query heads that share a kv head. `query_axes` and `head_tail_chunks`
    as kiln.attention's; on a block of the queries the k and v gradients are
    this block's share, summed over the query axes.

    Example:

    ```mlir
    %dq, %dk, %dv = kiln.attention_backward %do, %q, %k, %v, %o, %lse
        {causal, scale = 0.0884 : f32, fqn = "layers.0.attention.inner_attention"}
        : (tensor<2x128x16x128xf32>, tensor<2x128x16x128xf32>, tensor<2x128x8x128xf32>,
           tensor<2x128x8x128xf32>, tensor<2x128x16x128xf32>, tensor<2x16x128xf32>)
        -> (tensor<2x128x16x128xf32>, tensor<2x128x8x128xf32>, tensor<2x128x8x128xf32>)
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$out_grad, Kiln_FloatTensor:$q, Kiln_FloatTensor:$k,
                       Kiln_FloatTensor:$v, Kiln_FloatTensor:$out, Kiln_F32Tensor:$lse,
                       UnitAttr:$causal, F32Attr:$scale, StrAttr:$fqn,
                       OptionalAttr<DenseI16ArrayAttr>:$query_axes,
                       OptionalAttr<I64Attr>:$head_tail_chunks);
  let results = (outs Kiln_FloatTensor:$q_grad, Kiln_FloatTensor:$k_grad,
                      Kiln_FloatTensor:$v_grad);
  let extraClassDeclaration = Kiln_AttentionClass;
  let hasVerifier = 1;
}

def Kiln_SwigluBackwardOp : Kiln_BackwardOp<"swiglu_backward", ["getOutGrad"]> {
  let summary = "Gradients of silu(gate) * up";
  let description = [{
    Example:

    ```mlir
    %dgate, %dup = kiln.swiglu_backward %da, %gate, %up {fqn = "layers.0.feed_forward.swiglu"}
        : (tensor<2x128x3072xf32>, tensor<2x128x3072xf32>, tensor<2x128x3072xf32>)
        -> (tensor<2x128x3072xf32>, tensor<2x128x3072xf32>)
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$out_grad, Kiln_FloatTensor:$gate,
                       Kiln_FloatTensor:$up, StrAttr:$fqn);
  let results = (outs Kiln_FloatTensor:$gate_grad, Kiln_FloatTensor:$up_grad);
}

def Kiln_CrossEntropyBackwardOp : Kiln_BackwardOp<"cross_entropy_backward", ["getLossGrad"],
                                                  [], ["localize"]> {
  let summary = "(softmax(logits) - onehot(labels)) * loss_grad / positions";
  // positions: total_positions when set (see kiln.cross_entropy).
  let description = [{
    Example:

    ```mlir
    %dlogits = kiln.cross_entropy_backward %logits, %labels, %seed {fqn = "loss"}
        : (tensor<2x128x151936xf32>, tensor<2x128xi64>, tensor<f32>) -> tensor<2x128x151936xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$logits, Kiln_IdTensor:$labels,
                       Kiln_F32Tensor:$loss_grad, StrAttr:$fqn,
                       OptionalAttr<I64Attr>:$total_positions);
  let results = (outs Kiln_FloatTensor:$logits_grad);
}
