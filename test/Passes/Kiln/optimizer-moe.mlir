// RUN: kiln-opt %s --kiln-autodiff --kiln-optimizer="load-balance-coeff=0.001" | FileCheck %s
// RUN: kiln-opt %s --kiln-autodiff --kiln-optimizer | FileCheck %s --check-prefix=OFF
// RUN: not kiln-opt %s --kiln-autodiff --kiln-optimizer="load-balance-coeff=-1" 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: kiln-opt %s --kiln-autodiff --kiln-optimizer="microbatches=2" | FileCheck %s --check-prefix=ACCUM
// RUN: kiln-opt %s --kiln-autodiff --kiln-optimizer="microbatches=2 load-balance-coeff=0.001" | FileCheck %s --check-prefix=ACCUM-BIAS

// A MoE layer with the router's aux loss. kiln-optimizer carries the aux
// loss metric to @train_step, and with load-balance-coeff adds torchtitan's
// aux-loss-free balancing: an expert-bias state per router that steers its
// selection in the training step only, updated from the step's routing.

// @loss and @loss_grad keep Hugging Face's routing: no bias.
// CHECK-LABEL: func.func @loss(
// CHECK: kiln.router %{{[^,]*}} {fqn = "layers.0.moe.router", norm_topk_prob, top_k = 2 : i64} : (tensor<1x2x4xf32>)
// CHECK-LABEL: func.func @loss_grad(
// CHECK: kiln.router %{{[^,]*}} {fqn = "layers.0.moe.router", {{.*}}} : (tensor<1x2x4xf32>)

// CHECK-LABEL: func.func @train_step(
// CHECK-SAME: %[[BIAS:[a-z0-9]+]]: tensor<4xf32> {kiln.state = "expert_bias.layers.0.moe.router"}
// CHECK-SAME: tensor<4xf32> {kiln.state = "expert_bias.layers.0.moe.router"}, tensor<f32> {kiln.output = "loss"}, tensor<f32> {kiln.output = "grad_norm"}, tensor<f32> {kiln.output = "aux_loss"})
// CHECK: %{{.*}}, %[[IDS:[a-z_0-9]+]], %{{.*}} = kiln.router %{{.*}}, %[[BIAS]] {fqn = "layers.0.moe.router", {{.*}}} : (tensor<1x2x4xf32>, tensor<4xf32>)
// CHECK: %[[NEW:.*]] = kiln.expert_bias_update %[[BIAS]], %[[IDS]] {coeff = 1.000000e-03 : f64, fqn = "layers.0.moe.router"}
// CHECK: return {{.*}}%[[NEW]], %{{.*}}, %{{.*}}, %{{.*}} :

// OFF-LABEL: func.func @train_step(
// OFF-NOT: expert_bias
// OFF: kiln.output = "aux_loss"
// OFF-NOT: expert_bias

// BAD: kiln-optimizer: load-balance-coeff must be a finite number >= 0

// With gradient accumulation the aux loss, like the loss, is the mean of the
// microbatches' values.
// ACCUM-LABEL: func.func @train_step(
// ACCUM: %[[AUX0:[0-9]+]] = kiln.load_balancing_loss %
// ACCUM: %[[AUX1:[0-9]+]] = kiln.load_balancing_loss %
// ACCUM: %[[SUM:.*]] = kiln.add %[[AUX0]], %[[AUX1]] {fqn = "optimizer.accumulate.aux_loss"}
// ACCUM: %[[MEAN:.*]] = kiln.scale %[[SUM]] {factor = 5.000000e-01 : f64, fqn = "optimizer.mean.aux_loss"}
// ACCUM: return {{.*}}, %[[MEAN]] :
// With the expert bias, both microbatches route with the step's bias, and
// one update counts the load of both.
// ACCUM-BIAS-LABEL: func.func @train_step(
// ACCUM-BIAS-SAME: %[[BIAS:[a-z0-9]+]]: tensor<4xf32> {kiln.state = "expert_bias.layers.0.moe.router"}
// ACCUM-BIAS: %{{.*}}, %[[E0:[a-z_0-9]+]], %{{.*}} = kiln.router {{.*}}, %[[BIAS]] {
// ACCUM-BIAS: %{{.*}}, %[[E1:[a-z_0-9]+]], %{{.*}} = kiln.router {{.*}}, %[[BIAS]] {
// ACCUM-BIAS: kiln.expert_bias_update %[[BIAS]], %[[E0]], %[[E1]] {coeff = 1.000000e-03 : f64, fqn = "layers.0.moe.router"}

module {
  func.func @loss(%x: tensor<1x2x8xf32> {kiln.input = "input_ids"},
                  %labels: tensor<1x2xi64> {kiln.input = "labels"},
                  %gate: tensor<4x8xf32> {kiln.param = "gate"},
                  %w1: tensor<4x6x8xf32> {kiln.param = "w1"},
                  %w3: tensor<4x6x8xf32> {kiln.param = "w3"},
                  %w2: tensor<4x8x6xf32> {kiln.param = "w2"})
      -> (tensor<f32>, tensor<f32> {kiln.output = "aux_loss"}) {
    %logits = kiln.linear %x, %gate {fqn = "layers.0.moe.router.gate"} : (tensor<1x2x8xf32>, tensor<4x8xf32>) -> tensor<1x2x4xf32>
    %w, %ids, %p = kiln.router %logits {fqn = "layers.0.moe.router", norm_topk_prob, top_k = 2 : i64}
        : (tensor<1x2x4xf32>) -> (tensor<1x2x2xf32>, tensor<1x2x2xi64>, tensor<1x2x4xf32>)
    %y = kiln.grouped_experts %x, %w, %ids, %w1, %w3, %w2 {fqn = "layers.0.moe.experts"}
        : (tensor<1x2x8xf32>, tensor<1x2x2xf32>, tensor<1x2x2xi64>, tensor<4x6x8xf32>, tensor<4x6x8xf32>, tensor<4x8x6xf32>) -> tensor<1x2x8xf32>
    %ce = kiln.cross_entropy %y, %labels {fqn = "loss"} : (tensor<1x2x8xf32>, tensor<1x2xi64>) -> tensor<f32>
    %aux = kiln.load_balancing_loss %p, %ids {fqn = "aux_loss"} : (tensor<1x2x4xf32>, tensor<1x2x2xi64>) -> tensor<f32>
    %scaled = kiln.scale %aux {factor = 1.0e-2 : f64, fqn = "aux_loss.scaled"} : (tensor<f32>) -> tensor<f32>
    %total = kiln.add %ce, %scaled {fqn = "loss.with_aux"} : (tensor<f32>, tensor<f32>) -> tensor<f32>
    return %total, %aux : tensor<f32>, tensor<f32>
  }
}
