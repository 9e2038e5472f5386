//===- KilnMoeOps.td - The mixture-of-experts layer --------*- tablegen -*-===//
//
// Qwen3-MoE's sparse MLP as Hugging Face computes it, in ops a
// kernel-substitution rule can claim (one node per module) and a sharding
// rule can split: the router's gate is a kiln.linear, then kiln.router
// (softmax, top-k), kiln.grouped_experts (the experts' SwiGLU MLPs over the
// tokens routed to them), and kiln.load_balancing_loss over every sparse
// layer. Included from KilnOps.td.
//
//===----------------------------------------------------------------------===//

def Kiln_RouterOp : Kiln_Op<"router", [DeclareOpInterfaceMethods<Kiln_VjpOpInterface>]> {
  let summary = "Top-k routing: softmax over all experts in f32, top-k, renormalise";
  let description = [{
    For router logits `[..., experts]`: `probs = softmax(logits)` in f32 over
    every expert; `experts [..., top_k]` (i64) are the ids of the `top_k`
    largest probabilities, in descending order, and `weights [..., top_k]`
    their probabilities, divided by their sum when `norm_topk_prob` is set.
    Equal probabilities select the lower expert id first (torch.topk leaves
    the order of ties unspecified). The top-k selection is not
    differentiated; gradients flow through the selected weights and
    through `probs` (the load-balancing loss reads them).

    With `expert_bias` `[experts]` (torchtitan's aux-loss-free load
    balancing, added to the training step by kiln-optimizer) experts are
    selected by `probs + expert_bias`; the weights stay the probabilities.

    Example:

    ```mlir
    %w, %ids, %p = kiln.router %logits {norm_topk_prob, top_k = 8 : i64,
                                       fqn = "layers.0.moe.router"}
        : (tensor<2x128x128xf32>) -> (tensor<2x128x8xf32>, tensor<2x128x8xi64>,
                                      tensor<2x128x128xf32>)
    ```
  }];
  let arguments = (ins Kiln_F32Tensor:$logits, Optional<Kiln_F32Tensor>:$expert_bias,
                       I64Attr:$top_k, UnitAttr:$norm_topk_prob, StrAttr:$fqn);
  let results = (outs Kiln_F32Tensor:$weights, RankedTensorOf<[I64]>:$experts,
                      Kiln_F32Tensor:$probs);
}

def Kiln_ExpertBiasUpdateOp : Kiln_Op<"expert_bias_update", [
    DeclareOpInterfaceMethods<Kiln_TiedOperandOpInterface>]> {
  let summary = "torchtitan's aux-loss-free balancing: the expert bias after a step";
  let description = [{
    With `tokens_e` the number of (token, slot) selections of expert e in
    `experts` (this step's routing, over every rank; one operand per
    microbatch when the step accumulates gradients, their loads summed), in
    f32:
    `delta = coeff * sign(mean(tokens) - tokens)`, centred to mean 0, and
    the result is `expert_bias + delta`: under-loaded experts become more
    likely to be selected. Not differentiated; the new bias may overwrite
    the old one.

    Example:

    ```mlir
    %b2 = kiln.expert_bias_update %b, %ids {coeff = 1.0e-3 : f64, fqn = "layers.0.moe.router"}
        : (tensor<64xf32>, tensor<2x128x4xi64>) -> tensor<64xf32>
    ```
  }];
  let arguments = (ins Kiln_F32Tensor:$expert_bias, Variadic<Kiln_IdTensor>:$experts,
                       F64Attr:$coeff, StrAttr:$fqn);
  let results = (outs Kiln_F32Tensor:$result);
}

def Kiln_GroupedExpertsOp : Kiln_Op<"grouped_experts", [
    DeclareOpInterfaceMethods<Kiln_VjpOpInterface>], ["localize"]> {
  let summary = "The routed experts' SwiGLU MLPs, weighted and summed per token";
  let description = [{
    x `[..., hidden]`; `weights` (f32) and `experts` (ids) `[..., k]` from
    kiln.router; the experts' weights stacked along a first dimension:
    `w1` (gate_proj) and `w3` (up_proj) `[experts, inter, hidden]`, `w2`
    (down_proj) `[experts, hidden, inter]`. Tokens are grouped by expert and
    each expert runs `w2_e (silu(w1_e x) * (w3_e x))` over its block of
    tokens; each token's outputs are scaled by its routing weights and
    summed in ascending expert order. No capacity limit: every token reaches
    all of its k experts, however uneven the load.

    With `expert_axes` (expert parallelism, set by kiln-partition) the
    stacks hold this rank's block of the `num_experts` experts, at its
    coordinate over those grid axes; pairs routed to experts held elsewhere
    contribute nothing (the result is a partial sum over the axes).

    `blocked` (kiln.expert_dispatch's buffer): input's first dimension
    indexes contiguous blocks of the experts, and its rows are routed only
    to their block's experts, so the experts split with that dimension and
    nothing is summed over them. An expert id of -1 marks an unfilled row:
    it contributes nothing.

    `round_to` (bf16 mixed precision, set by kiln-mixed-precision) rounds
    what a dense MLP's linears would round: each expert's gate and up
    projections, the SwiGLU product the down projection takes and the
    expert's output, and in the backward the cotangents of those values;
    the input and the result are rounded by kiln.cast ops around the op.

    The cost counts only routed tokens (`tokens * k`, the active FLOPs; under
    expert parallelism the rank's share of them at a balanced load; blocked,
    every row of the buffer, its capacity);
    `getPeakGroupFlops` is the busiest expert's share under the worst load
    (every token routed to it).

    Example:

    ```mlir
    %y = kiln.grouped_experts %x, %w, %ids, %w1, %w3, %w2 {fqn = "layers.0.moe.experts"}
        : (tensor<2x128x2048xf32>, tensor<2x128x8xf32>, tensor<2x128x8xi64>,
           tensor<128x768x2048xf32>, tensor<128x768x2048xf32>, tensor<128x2048x768xf32>)
        -> tensor<2x128x2048xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$input, Kiln_F32Tensor:$weights,
                       Kiln_IdTensor:$experts, Kiln_FloatTensor:$w1, Kiln_FloatTensor:$w3,
                       Kiln_FloatTensor:$w2, StrAttr:$fqn,
                       OptionalAttr<DenseI16ArrayAttr>:$expert_axes,
                       OptionalAttr<I64Attr>:$num_experts, UnitAttr:$blocked,
                       OptionalAttr<TypeAttrOf<AnyTypeOf<[BF16, F16]>>>:$round_to);
  let results = (outs Kiln_FloatTensor:$result);
  let hasVerifier = 1;
  let extraClassDeclaration = !strconcat([{
    /// (token, expert) pairs: tokens * k; under expert parallelism the
    /// rank's share at a balanced load.
    double getRoutedPairs();
    /// Shadows the CostOpInterface default: one expert's GEMMs over every token.
    double getPeakGroupFlops();
  }], Kiln_MatmulClass);
}

def Kiln_LoadBalancingLossOp : Kiln_Op<"load_balancing_loss", [
    SameVariadicOperandSize, DeclareOpInterfaceMethods<Kiln_VjpOpInterface>]> {
  let summary = "Switch-Transformer load-balancing loss over every sparse layer";
  let description = [{
    Hugging Face's `load_balancing_loss_func` (no padding mask): with the
    router probabilities `probs` `[..., experts]` and selected ids `experts`
    `[..., k]` of every sparse layer taken together as N token rows,
    `loss = experts * sum_e (count_e / N) * (sum_rows probs[:, e] / N)`,
    where `count_e` counts the (row, slot) pairs that selected e. The
    counts are not differentiated. The result is unscaled; the training loss
    adds `router_aux_loss_coef` times it.

    Example:

    ```mlir
    %aux = kiln.load_balancing_loss %p0, %p1, %ids0, %ids1 {fqn = "aux_loss"}
        : (tensor<2x128x64xf32>, tensor<2x128x64xf32>, tensor<2x128x4xi64>,
           tensor<2x128x4xi64>) -> tensor<f32>
    ```
  }];
  let arguments = (ins Variadic<Kiln_F32Tensor>:$probs, Variadic<Kiln_IdTensor>:$experts,
                       StrAttr:$fqn);
  let results = (outs 0DTensorOf<[F32]>:$loss);
}

def Kiln_ScaleOp : Kiln_ElementwiseOp<"scale", ["input", "result"], [
    DeclareOpInterfaceMethods<Kiln_VjpOpInterface>]> {
  let summary = "input * factor (e.g. router_aux_loss_coef times the auxiliary loss)";
  let description = [{
    Example:

    ```mlir
    %s = kiln.scale %aux {factor = 1.0e-3 : f64, fqn = "aux_loss.scaled"}
        : (tensor<f32>) -> tensor<f32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$input, F64Attr:$factor, StrAttr:$fqn);
  let results = (outs Kiln_FloatTensor:$result);
}

//===----------------------------------------------------------------------===//
// Backward ops
//===----------------------------------------------------------------------===//

def Kiln_RouterBackwardOp : Kiln_BackwardOp<"router_backward",
                                            ["getWeightsGrad", "getProbsGrad"]> {
  let summary = "Gradient of the router logits through the selected weights and probs";
  let description = [{
    From the forward's `probs` and `experts` and the cotangents of `weights`
    and `probs`: the renormalisation's Jacobian (when `norm_topk_prob`) on
    the selected entries, then the softmax's.

    Example:

    ```mlir
    %dlogits = kiln.router_backward %p, %ids, %dw, %dp {norm_topk_prob,
                                                      fqn = "layers.0.moe.router"}
        : (tensor<2x128x128xf32>, tensor<2x128x8xi64>, tensor<2x128x8xf32>,
           tensor<2x128x128xf32>) -> tensor<2x128x128xf32>
    ```
  }];
  let arguments = (ins Kiln_F32Tensor:$probs, RankedTensorOf<[I64]>:$experts,
                       Kiln_F32Tensor:$weights_grad, Kiln_F32Tensor:$probs_grad,
                       UnitAttr:$norm_topk_prob, StrAttr:$fqn);
  let results = (outs Kiln_F32Tensor:$logits_grad);
}

def Kiln_GroupedExpertsBackwardOp : Kiln_BackwardOp<"grouped_experts_backward",
                                                    ["getResultGrad"], [], ["localize"]> {
  let summary = "Gradients of grouped_experts: input, routing weights and expert weights";
  let description = [{
    Recomputes each expert's gate and up projections from the saved input
    rather than keeping `[tokens * k, inter]` activations from the forward.
    With `round_to`, rounds as the forward does, and the cotangents of the
    rounded values too.
    Experts no token reached get zero weight gradients.

    Example:

    ```mlir
    %dx, %dw, %dw1, %dw3, %dw2 = kiln.grouped_experts_backward %dy, %x, %w, %ids, %w1, %w3, %w2
        {fqn = "layers.0.moe.experts"}
        : (tensor<2x128x2048xf32>, tensor<2x128x2048xf32>, tensor<2x128x8xf32>,
           tensor<2x128x8xi64>, tensor<128x768x2048xf32>, tensor<128x768x2048xf32>,
           tensor<128x2048x768xf32>)
        -> (tensor<2x128x2048xf32>, tensor<2x128x8xf32>, tensor<128x768x2048xf32>,
            tensor<128x768x2048xf32>, tensor<128x2048x768xf32>)
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$result_grad, Kiln_FloatTensor:$input,
                       Kiln_F32Tensor:$weights, Kiln_IdTensor:$experts,
                       Kiln_FloatTensor:$w1, Kiln_FloatTensor:$w3, Kiln_FloatTensor:$w2,
                       StrAttr:$fqn, OptionalAttr<DenseI16ArrayAttr>:$expert_axes,
                       OptionalAttr<I64Attr>:$num_experts, UnitAttr:$blocked,
                       OptionalAttr<TypeAttrOf<AnyTypeOf<[BF16, F16]>>>:$round_to);
  let hasVerifier = 1;
  let results = (outs Kiln_FloatTensor:$input_grad, Kiln_F32Tensor:$weights_grad,
                      Kiln_FloatTensor:$w1_grad, Kiln_FloatTensor:$w3_grad,
                      Kiln_FloatTensor:$w2_grad);
  let extraClassDeclaration = Kiln_MatmulClass;
}

def Kiln_LoadBalancingLossBackwardOp : Kiln_BackwardOp<"load_balancing_loss_backward",
                                                       ["getLossGrad"]> {
  let summary = "Gradients of load_balancing_loss with respect to every layer's probs";
  let description = [{
    `d probs_l[row, e] = loss_grad * experts * count_e / N^2`, from the
    selected ids alone (the probabilities enter the loss linearly).

    Example:

    ```mlir
    %dp0, %dp1 = kiln.load_balancing_loss_backward %g, %ids0, %ids1
        {num_experts = 64 : i64, fqn = "aux_loss"}
        : (tensor<f32>, tensor<2x128x4xi64>, tensor<2x128x4xi64>)
        -> (tensor<2x128x64xf32>, tensor<2x128x64xf32>)
    ```
  }];
  let arguments = (ins 0DTensorOf<[F32]>:$loss_grad, Variadic<Kiln_IdTensor>:$experts,
                       I64Attr:$num_experts, StrAttr:$fqn);
  let results = (outs Variadic<Kiln_F32Tensor>:$probs_grad);
}
