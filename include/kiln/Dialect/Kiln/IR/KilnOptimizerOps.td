//===- KilnOptimizerOps.td - Optimizer ops -----------------*- tablegen -*-===//
//
// The update half of a training step: gradient norm and clipping, the
// learning-rate schedule and AdamW. Optimizer state (the update count and
// each parameter's moments) is explicit: ops take the old state and return
// the new. Included from KilnOps.td.
//
//===----------------------------------------------------------------------===//

def Kiln_GlobalNormOp : Kiln_Op<"global_norm"> {
  let summary = "Total L2 norm over every element of every operand (f32 scalar)";
  let arguments = (ins Variadic<Kiln_FloatTensor>:$tensors, StrAttr:$fqn);
  let results = (outs Kiln_F32Tensor:$norm);
}

def Kiln_ClipCoefOp : Kiln_Op<"clip_coef"> {
  let summary = "min(1, max_norm / (norm + 1e-6)), torch's clip_grad_norm_ factor";
  let arguments = (ins Kiln_F32Tensor:$norm, F64Attr:$max_norm, StrAttr:$fqn);
  let results = (outs Kiln_F32Tensor:$coef);
}

def Kiln_LrScheduleOp : Kiln_Op<"lr_schedule"> {
  let summary = "Learning rate of update `step` (0-based): warmup, stable, decay";
  let description = [{
    torchtitan's linear-warmup-stable-decay factor times `lr`: for k < warmup,
    (k+1)/warmup; for k < warmup + stable, 1; after that progress =
    (k + 1 - warmup - stable) / decay and the factor is `1 - progress`
    (linear), `1 - sqrt(progress)` (sqrt) or `(1 + cos(pi progress)) / 2`
    (cosine), rescaled to [min_lr_factor, 1].
  }];
  let arguments = (ins AnyRankedTensor:$step, F64Attr:$lr, I64Attr:$warmup_steps,
                       I64Attr:$stable_steps, I64Attr:$decay_steps, Kiln_DecayTypeAttr:$decay_type,
                       F64Attr:$min_lr_factor, StrAttr:$fqn);
  let results = (outs Kiln_F32Tensor:$result);
  let hasVerifier = 1;
}

def Kiln_AdamWOp : Kiln_Op<"adamw", [DeclareOpInterfaceMethods<Kiln_TiedOperandOpInterface>]> {
  let summary = "One torch.optim.AdamW update of one parameter";
  let description = [{
    With g = grad * grad_scale (the clipping coefficient) and t = step + 1:
    p *= 1 - lr * weight_decay; m = m + (1 - beta1)(g - m);
    v = beta2 v + (1 - beta2) g^2;
    p -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps).
    Returns the new parameter and moments, which may overwrite the old ones
    (TiedOperandOpInterface).
  }];
  let arguments = (ins Kiln_FloatTensor:$param, Kiln_FloatTensor:$grad,
                       Kiln_FloatTensor:$exp_avg, Kiln_FloatTensor:$exp_avg_sq,
                       AnyRankedTensor:$step, Kiln_F32Tensor:$lr,
                       Kiln_F32Tensor:$grad_scale, F64Attr:$beta1, F64Attr:$beta2,
                       F64Attr:$eps, F64Attr:$weight_decay, StrAttr:$fqn);
  let results = (outs Kiln_FloatTensor:$param_out, Kiln_FloatTensor:$exp_avg_out,
                      Kiln_FloatTensor:$exp_avg_sq_out);
}

def Kiln_NextStepOp : Kiln_Op<"next_step"> {
  let summary = "The optimizer's update count plus one";
  let arguments = (ins AnyRankedTensor:$step, StrAttr:$fqn);
  let results = (outs AnyRankedTensor:$result);
}
