// RUN: kiln-opt %s --kiln-optimizer="lr=0.001 beta1=0.8 beta2=0.99 eps=1e-6 weight-decay=0.05 max-norm=0.5 warmup-steps=3 stable-steps=4 decay-steps=5 decay-type=cosine min-lr-factor=0.1" --split-input-file --verify-diagnostics | FileCheck %s
// RUN: kiln-opt %s --kiln-optimizer="microbatches=3" --split-input-file --verify-diagnostics | FileCheck %s --check-prefix=ACCUM
// RUN: not kiln-opt %s --kiln-optimizer="microbatches=0" --split-input-file 2>&1 | FileCheck %s --check-prefix=ZERO

// A loss and its gradients (as kiln-autodiff leaves them) for two parameters.
func.func @loss_grad(%ids: tensor<1x2xi64> {kiln.input = "input_ids"},
                     %labels: tensor<1x2xi64> {kiln.input = "labels"},
                     %table: tensor<8x4xf32> {kiln.param = "model.embed_tokens.weight"},
                     %norm: tensor<4xf32> {kiln.param = "model.norm.weight"})
    -> (tensor<f32> {kiln.output = "loss"}, tensor<8x4xf32> {kiln.grad = "model.embed_tokens.weight"},
        tensor<4xf32> {kiln.grad = "model.norm.weight"}) {
  %h = kiln.embedding %table, %ids {fqn = "tok_embeddings"} : (tensor<8x4xf32>, tensor<1x2xi64>) -> tensor<1x2x4xf32>
  %n = kiln.rms_norm %h, %norm {eps = 1.0e-6 : f32, fqn = "norm"} : (tensor<1x2x4xf32>, tensor<4xf32>) -> tensor<1x2x4xf32>
  %logits = kiln.linear %n, %table {fqn = "output"} : (tensor<1x2x4xf32>, tensor<8x4xf32>) -> tensor<1x2x8xf32>
  %loss = kiln.cross_entropy %logits, %labels {fqn = "loss"} : (tensor<1x2x8xf32>, tensor<1x2xi64>) -> tensor<f32>
  %seed = kiln.constant {fqn = "loss.seed_grad", value = dense<1.0> : tensor<f32>} : tensor<f32>
  %dl = kiln.cross_entropy_backward %logits, %labels, %seed {fqn = "loss"} : (tensor<1x2x8xf32>, tensor<1x2xi64>, tensor<f32>) -> tensor<1x2x8xf32>
  %dn = kiln.linear_backward_data %dl, %table {fqn = "output"} : (tensor<1x2x8xf32>, tensor<8x4xf32>) -> tensor<1x2x4xf32>
  %dt1 = kiln.linear_backward_weight %dl, %n {fqn = "output"} : (tensor<1x2x8xf32>, tensor<1x2x4xf32>) -> tensor<8x4xf32>
  %dh, %dw = kiln.rms_norm_backward %dn, %h, %norm {eps = 1.0e-6 : f32, fqn = "norm"} : (tensor<1x2x4xf32>, tensor<1x2x4xf32>, tensor<4xf32>) -> (tensor<1x2x4xf32>, tensor<4xf32>)
  %dt2 = kiln.embedding_backward %dh, %ids {fqn = "tok_embeddings", vocab_size = 8 : i64} : (tensor<1x2x4xf32>, tensor<1x2xi64>) -> tensor<8x4xf32>
  %dt = kiln.add %dt1, %dt2 {fqn = "tok_embeddings.grad_accum"} : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<8x4xf32>
  return %loss, %dt, %dw : tensor<f32>, tensor<8x4xf32>, tensor<4xf32>
}

// CHECK-LABEL: func.func @train_step(
// CHECK-SAME: %[[P0:.*]]: tensor<8x4xf32> {kiln.param = "model.embed_tokens.weight"},
// CHECK-SAME: %[[P1:.*]]: tensor<4xf32> {kiln.param = "model.norm.weight"},
// CHECK-SAME: %[[STEP:.*]]: tensor<i64> {kiln.state = "step"},
// CHECK-SAME: %[[M0:.*]]: tensor<8x4xf32> {kiln.state = "exp_avg.model.embed_tokens.weight"},
// CHECK-SAME: %[[M1:.*]]: tensor<4xf32> {kiln.state = "exp_avg.model.norm.weight"},
// CHECK-SAME: %[[V0:.*]]: tensor<8x4xf32> {kiln.state = "exp_avg_sq.model.embed_tokens.weight"},
// CHECK-SAME: %[[V1:.*]]: tensor<4xf32> {kiln.state = "exp_avg_sq.model.norm.weight"},
// CHECK-SAME: %[[IDS:.*]]: tensor<1x2xi64> {kiln.input = "input_ids"},
// CHECK-SAME: %[[LABELS:.*]]: tensor<1x2xi64> {kiln.input = "labels"})
// CHECK-SAME: -> (tensor<8x4xf32> {kiln.param = "model.embed_tokens.weight"}, tensor<4xf32> {kiln.param = "model.norm.weight"}, tensor<i64> {kiln.state = "step"},
// CHECK-SAME: tensor<f32> {kiln.output = "loss"}, tensor<f32> {kiln.output = "grad_norm"})
// The loss and gradients are inlined, reading the new function's arguments.
// CHECK: kiln.embedding %[[P0]], %[[IDS]]
// CHECK: %[[LOSS:[0-9]+]] = kiln.cross_entropy
// CHECK: %{{[a-z_0-9]+}}, %[[DW:[a-z_0-9]+]] = kiln.rms_norm_backward {{.*}}, %[[P1]]
// CHECK: %[[DT:[0-9]+]] = kiln.add
// CHECK: %[[NORM:[0-9]+]] = kiln.global_norm %[[DT]], %[[DW]] {fqn = "optimizer.grad_norm"} : (tensor<8x4xf32>, tensor<4xf32>) -> tensor<f32>
// CHECK: %[[COEF:[0-9]+]] = kiln.clip_coef %[[NORM]] {fqn = "optimizer.clip_grad_norm", max_norm = 5.000000e-01 : f64}
// CHECK: %[[LR:[0-9]+]] = kiln.lr_schedule %[[STEP]] {decay_steps = 5 : i64, decay_type = #kiln.decay_type<cosine>, fqn = "lr_scheduler", lr = 1.000000e-03 : f64, min_lr_factor = 1.000000e-01 : f64, stable_steps = 4 : i64, warmup_steps = 3 : i64}
// CHECK: %[[NP0:[a-z_0-9]+]], %[[NM0:[a-z_0-9]+]], %[[NV0:[a-z_0-9]+]] = kiln.adamw %[[P0]], %[[DT]], %[[M0]], %[[V0]], %[[STEP]], %[[LR]], %[[COEF]] {beta1 = 8.000000e-01 : f64, beta2 = 0.98999999999999999 : f64, eps = 9.9999999999999995E-7 : f64, fqn = "tok_embeddings", weight_decay = 5.000000e-02 : f64}
// Each update is named after the module owning its parameter.
// CHECK: %[[NP1:[a-z_0-9]+]], %[[NM1:[a-z_0-9]+]], %[[NV1:[a-z_0-9]+]] = kiln.adamw %[[P1]], %[[DW]], %[[M1]], %[[V1]], %[[STEP]], %[[LR]], %[[COEF]] {{.*}}fqn = "norm"
// CHECK: %[[NEXT:[0-9]+]] = kiln.next_step %[[STEP]] {fqn = "optimizer.step"}
// CHECK: return %[[NP0]], %[[NP1]], %[[NEXT]], %[[NM0]], %[[NM1]], %[[NV0]], %[[NV1]], %[[LOSS]], %[[NORM]]

// Gradient accumulation over 3 microbatches: one copy of the inputs per
// microbatch, the body once on each in turn, each microbatch's gradient
// added to the running sum before the next starts; the 1/3 lands on the
// loss, the norm and the coefficient kiln.adamw scales the gradient by.
// ACCUM-LABEL: func.func @train_step(
// ACCUM-SAME: %[[P0:[a-z0-9]+]]: tensor<8x4xf32> {kiln.param = "model.embed_tokens.weight"},
// ACCUM-SAME: %[[IDS0:[a-z0-9]+]]: tensor<1x2xi64> {kiln.input = "input_ids", kiln.microbatch = 0 : i64},
// ACCUM-SAME: %{{[a-z0-9]+}}: tensor<1x2xi64> {kiln.input = "labels", kiln.microbatch = 0 : i64},
// ACCUM-SAME: %[[IDS1:[a-z0-9]+]]: tensor<1x2xi64> {kiln.input = "input_ids", kiln.microbatch = 1 : i64},
// ACCUM-SAME: %{{[a-z0-9]+}}: tensor<1x2xi64> {kiln.input = "labels", kiln.microbatch = 1 : i64},
// ACCUM-SAME: %[[IDS2:[a-z0-9]+]]: tensor<1x2xi64> {kiln.input = "input_ids", kiln.microbatch = 2 : i64},
// ACCUM-SAME: %{{[a-z0-9]+}}: tensor<1x2xi64> {kiln.input = "labels", kiln.microbatch = 2 : i64})
// ACCUM: kiln.embedding %[[P0]], %[[IDS0]]
// ACCUM: %[[L0:[0-9]+]] = kiln.cross_entropy
// ACCUM: %{{[a-z_0-9]+}}, %[[DW0:[a-z_0-9]+]] = kiln.rms_norm_backward
// ACCUM: %[[DT0:[0-9]+]] = kiln.add {{.*}}fqn = "tok_embeddings.grad_accum"
// ACCUM-NOT: kiln.embedding %[[P0]], %[[IDS2]]
// ACCUM: kiln.embedding %[[P0]], %[[IDS1]]
// ACCUM: %[[L1:[0-9]+]] = kiln.cross_entropy
// ACCUM: %{{[a-z_0-9]+}}, %[[DW1:[a-z_0-9]+]] = kiln.rms_norm_backward
// ACCUM: %[[DT1:[0-9]+]] = kiln.add {{.*}}fqn = "tok_embeddings.grad_accum"
// ACCUM: %[[LS1:[0-9]+]] = kiln.add %[[L0]], %[[L1]] {fqn = "optimizer.accumulate.loss"}
// ACCUM: %[[DTS1:[0-9]+]] = kiln.add %[[DT0]], %[[DT1]] {fqn = "optimizer.accumulate.model.embed_tokens.weight", kiln.accumulate}
// ACCUM: %[[DWS1:[0-9]+]] = kiln.add %[[DW0]], %[[DW1]] {fqn = "optimizer.accumulate.model.norm.weight", kiln.accumulate}
// ACCUM: kiln.embedding %[[P0]], %[[IDS2]]
// ACCUM: %[[L2:[0-9]+]] = kiln.cross_entropy
// ACCUM: %[[LS2:[0-9]+]] = kiln.add %[[LS1]], %[[L2]] {fqn = "optimizer.accumulate.loss"}
// ACCUM: %[[DTS2:[0-9]+]] = kiln.add %[[DTS1]], {{.*}}fqn = "optimizer.accumulate.model.embed_tokens.weight"
// ACCUM: %[[DWS2:[0-9]+]] = kiln.add %[[DWS1]], {{.*}}fqn = "optimizer.accumulate.model.norm.weight"
// ACCUM: %[[LOSS:[0-9]+]] = kiln.scale %[[LS2]] {factor = 0.33333333333333331 : f64, fqn = "optimizer.mean.loss"}
// ACCUM: %[[SUMNORM:[0-9]+]] = kiln.global_norm %[[DTS2]], %[[DWS2]]
// ACCUM: %[[NORM:[0-9]+]] = kiln.scale %[[SUMNORM]] {factor = 0.33333333333333331 : f64, fqn = "optimizer.mean.grad_norm"}
// ACCUM: %[[CLIP:[0-9]+]] = kiln.clip_coef %[[NORM]]
// ACCUM: %[[COEF:[0-9]+]] = kiln.scale %[[CLIP]] {factor = 0.33333333333333331 : f64, fqn = "optimizer.mean.clip_grad_norm"}
// ACCUM: kiln.adamw %[[P0]], %[[DTS2]], {{.*}}, %[[COEF]] {
// ACCUM: return {{.*}}, %[[LOSS]], %[[NORM]] :
// ZERO: kiln-optimizer: microbatches must be at least 1, got 0

// -----

// expected-error@below {{kiln-optimizer: no function @loss_grad (run kiln-autodiff first)}}
module {
  func.func @loss(%x: tensor<f32>) -> tensor<f32> {
    return %x : tensor<f32>
  }
}

// -----

// Parameters are found by attribute: a gradient result that is missing is
// named by its parameter's key.
module {
  // expected-error@below {{kiln-optimizer: no gradient result of @loss_grad is tagged kiln.grad = "w"}}
  func.func @loss_grad(%ids: tensor<1x2xi64> {kiln.input = "input_ids"},
                       %w: tensor<4xf32> {kiln.param = "w"}) -> (tensor<f32> {kiln.output = "loss"}) {
    %c = kiln.constant {fqn = "c", value = dense<1.0> : tensor<f32>} : tensor<f32>
    return %c : tensor<f32>
  }
}

// -----

module {
  // expected-error@below {{@loss_grad: argument #1 has no role: tag it 'kiln.param', 'kiln.state', 'kiln.input' or 'kiln.grad'}}
  func.func @loss_grad(%ids: tensor<1x2xi64> {kiln.input = "input_ids"},
                       %w: tensor<4xf32>) -> (tensor<f32> {kiln.output = "loss"}) {
    %c = kiln.constant {fqn = "c", value = dense<1.0> : tensor<f32>} : tensor<f32>
    return %c : tensor<f32>
  }
}
