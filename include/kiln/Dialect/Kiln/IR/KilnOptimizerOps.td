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
  // With `squared`, the sum of squares: per-rank parts of a sharded norm,
  // summed across ranks before kiln.sqrt.
  let description = [{
    Example:

    ```mlir
    %norm = kiln.global_norm %dwq, %dw {fqn = "optimizer.grad_norm"}
        : (tensor<2048x1024xf32>, tensor<1024xf32>) -> tensor<f32>
    ```
  }];
  let arguments = (ins Variadic<Kiln_FloatTensor>:$tensors, StrAttr:$fqn, UnitAttr:$squared);
  let results = (outs Kiln_F32Tensor:$norm);
}

def Kiln_ClipCoefOp : Kiln_Op<"clip_coef"> {
  let summary = "min(1, max_norm / (norm + 1e-6)), torch's clip_grad_norm_ factor";
  let description = [{
    Example:

    ```mlir
    %coef = kiln.clip_coef %norm {max_norm = 1.0 : f64, fqn = "optimizer.clip_grad_norm"}
        : (tensor<f32>) -> tensor<f32>
    ```
  }];
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

    Example:

    ```mlir
    %lr = kiln.lr_schedule %step {lr = 8.0e-4 : f64, warmup_steps = 200 : i64,
        stable_steps = 800 : i64, decay_steps = 1000 : i64,
        decay_type = #kiln.decay_type<cosine>, min_lr_factor = 0.1 : f64,
        fqn = "lr_scheduler"} : (tensor<i64>) -> tensor<f32>
    ```
  }];
  let arguments = (ins Kiln_StepTensor:$step, F64Attr:$lr, I64Attr:$warmup_steps,
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

    Example:

    ```mlir
    %w2, %m2, %v2 = kiln.adamw %w, %dw, %m, %v, %step, %lr, %coef
        {beta1 = 0.9 : f64, beta2 = 0.95 : f64, eps = 1.0e-8 : f64, weight_decay = 0.1 : f64,
         fqn = "norm"}
        : (tensor<1024xf32>, tensor<1024xf32>, tensor<1024xf32>, tensor<1024xf32>,
           tensor<i64>, tensor<f32>, tensor<f32>)
        -> (tensor<1024xf32>, tensor<1024xf32>, tensor<1024xf32>)
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$param, Kiln_FloatTensor:$grad,
                       Kiln_FloatTensor:$exp_avg, Kiln_FloatTensor:$exp_avg_sq,
                       Kiln_StepTensor:$step, Kiln_F32Tensor:$lr,
                       Kiln_F32Tensor:$grad_scale, F64Attr:$beta1, F64Attr:$beta2,
                       F64Attr:$eps, F64Attr:$weight_decay, StrAttr:$fqn);
  let results = (outs Kiln_FloatTensor:$param_out, Kiln_FloatTensor:$exp_avg_out,
                      Kiln_FloatTensor:$exp_avg_sq_out);
}

def Kiln_SqrtOp : Kiln_ElementwiseOp<"sqrt", ["input", "result"]> {
  let summary = "Elementwise square root (the global norm from summed squares)";
  let description = [{
    Example:

    ```mlir
    %norm = kiln.sqrt %sum_sq {fqn = "optimizer.grad_norm"} : (tensor<f32>) -> tensor<f32>
    ```
  }];
  let arguments = (ins Kiln_F32Tensor:$input, StrAttr:$fqn);
  let results = (outs Kiln_F32Tensor:$result);
}

def Kiln_NextStepOp : Kiln_Op<"next_step"> {
  let summary = "The optimizer's update count plus one";
  let description = [{
    Example:

    ```mlir
    %next = kiln.next_step %step {fqn = "optimizer.step"} : (tensor<i64>) -> tensor<i64>
    ```
  }];
  let arguments = (ins Kiln_StepTensor:$step, StrAttr:$fqn);
  let results = (outs Kiln_StepTensor:$result);
}
