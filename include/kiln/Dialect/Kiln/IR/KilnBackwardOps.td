//===- KilnBackwardOps.td - Named backward ops -------------*- tablegen -*-===//
//
// Backward kernels in their own right, emitted by the forward ops' VJPs.
// They keep the forward op's fqn (they belong to the same module), read the
// saved forward values they need, and have the same shape rule / cost / CPU
// kernel obligations as every kiln op. Included from KilnOps.td.
//
//===----------------------------------------------------------------------===//

// A backward op: when every cotangent it reads is a zero constant, so is
// each of its results, and canonicalization replaces it by zeros (no work).
class Kiln_BackwardOp<string mnemonic, list<Trait> traits = []>
    : Kiln_Op<mnemonic, traits> {
  let hasCanonicalizer = 1;
}

def Kiln_ConstantOp : Kiln_Op<"constant", [DeclareOpInterfaceMethods<Kiln_VjpOpInterface>]> {
  let summary = "A splat float constant (e.g. the loss seed gradient 1.0)";
  let description = [{
    A leaf for autodiff: a constant in the loss simply has no gradient.
  }];
  let arguments = (ins ElementsAttr:$value, StrAttr:$fqn);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat = "attr-dict `:` type($result)";
}

def Kiln_EmbeddingBackwardOp : Kiln_BackwardOp<"embedding_backward"> {
  let summary = "Scatter-add of output gradients into the embedding table's gradient";
  let arguments = (ins Kiln_FloatTensor:$grad, Kiln_IdTensor:$ids, I64Attr:$vocab_size,
                       StrAttr:$fqn);
  let results = (outs Kiln_FloatTensor:$table_grad);
}

def Kiln_RmsNormBackwardOp : Kiln_BackwardOp<"rms_norm_backward"> {
  let summary = "Gradients of rms_norm with respect to its input and weight";
  let arguments = (ins Kiln_FloatTensor:$grad, Kiln_FloatTensor:$input,
                       Kiln_FloatTensor:$weight, F32Attr:$eps, StrAttr:$fqn);
  let results = (outs Kiln_FloatTensor:$input_grad, Kiln_FloatTensor:$weight_grad);
}

def Kiln_LinearBackwardDataOp : Kiln_BackwardOp<"linear_backward_data"> {
  let summary = "grad @ weight: the input gradient of linear";
  let arguments = (ins Kiln_FloatTensor:$grad, Kiln_FloatTensor:$weight, StrAttr:$fqn);
  let results = (outs Kiln_FloatTensor:$input_grad);
}

def Kiln_LinearBackwardWeightOp : Kiln_BackwardOp<"linear_backward_weight"> {
  let summary = "grad^T @ input summed over leading dims: the weight gradient of linear";
  let arguments = (ins Kiln_FloatTensor:$grad, Kiln_FloatTensor:$input, StrAttr:$fqn);
  let results = (outs Kiln_FloatTensor:$weight_grad);
}

def Kiln_RopeBackwardOp : Kiln_BackwardOp<"rope_backward"> {
  let summary = "Gradients of rope: the inverse rotation of the q and k gradients";
  let arguments = (ins Kiln_FloatTensor:$q_grad, Kiln_FloatTensor:$k_grad,
                       Kiln_F32Tensor:$cache, StrAttr:$fqn);
  let results = (outs Kiln_FloatTensor:$q_input_grad, Kiln_FloatTensor:$k_input_grad);
}

def Kiln_AttentionBackwardOp : Kiln_BackwardOp<"attention_backward"> {
  let summary = "Gradients of attention from the saved q, k, v, output and log-sum-exp";
  let description = [{
    Recomputes the softmax from the saved `lse` (no [s, s] probabilities are
    kept between forward and backward). GQA: the k and v gradients sum over
    the query heads that share a kv head.
  }];
  let arguments = (ins Kiln_FloatTensor:$out_grad, Kiln_FloatTensor:$q, Kiln_FloatTensor:$k,
                       Kiln_FloatTensor:$v, Kiln_FloatTensor:$out, Kiln_F32Tensor:$lse,
                       UnitAttr:$causal, F32Attr:$scale, StrAttr:$fqn);
  let results = (outs Kiln_FloatTensor:$q_grad, Kiln_FloatTensor:$k_grad,
                      Kiln_FloatTensor:$v_grad);
}

def Kiln_SwigluBackwardOp : Kiln_BackwardOp<"swiglu_backward"> {
  let summary = "Gradients of silu(gate) * up";
  let arguments = (ins Kiln_FloatTensor:$out_grad, Kiln_FloatTensor:$gate,
                       Kiln_FloatTensor:$up, StrAttr:$fqn);
  let results = (outs Kiln_FloatTensor:$gate_grad, Kiln_FloatTensor:$up_grad);
}

def Kiln_CrossEntropyBackwardOp : Kiln_BackwardOp<"cross_entropy_backward"> {
  let summary = "(softmax(logits) - onehot(labels)) * loss_grad / positions";
  let arguments = (ins Kiln_FloatTensor:$logits, Kiln_IdTensor:$labels,
                       Kiln_F32Tensor:$loss_grad, StrAttr:$fqn);
  let results = (outs Kiln_FloatTensor:$logits_grad);
}
