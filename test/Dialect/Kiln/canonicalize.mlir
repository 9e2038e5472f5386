// Folds that remove real work: backward ops of a zero cotangent become
// zeros, and adding zeros folds away.
// RUN: kiln-opt %s --canonicalize | FileCheck %s

// CHECK-LABEL: func.func @zero_cotangent
// CHECK-NOT: kiln.linear_backward_data
// CHECK-NOT: kiln.linear_backward_weight
// CHECK: %[[Z:.*]] = kiln.constant {fqn = "layers.0.attention.wq.zero_grad", value = dense<0.000000e+00> : tensor<2x3x4xf32>}
// CHECK: %[[ZW:.*]] = kiln.constant {fqn = "layers.0.attention.wq.zero_grad", value = dense<0.000000e+00> : tensor<5x4xf32>}
// CHECK: return %[[Z]], %[[ZW]]
func.func @zero_cotangent(%x: tensor<2x3x4xf32>, %w: tensor<5x4xf32>) -> (tensor<2x3x4xf32>, tensor<5x4xf32>) {
  %g = kiln.constant {fqn = "layers.0.attention.wq.zero_grad", value = dense<0.0> : tensor<2x3x5xf32>} : tensor<2x3x5xf32>
  %dx = kiln.linear_backward_data %g, %w {fqn = "layers.0.attention.wq"} : (tensor<2x3x5xf32>, tensor<5x4xf32>) -> tensor<2x3x4xf32>
  %dw = kiln.linear_backward_weight %g, %x {fqn = "layers.0.attention.wq"} : (tensor<2x3x5xf32>, tensor<2x3x4xf32>) -> tensor<5x4xf32>
  return %dx, %dw : tensor<2x3x4xf32>, tensor<5x4xf32>
}

// A non-zero cotangent keeps the backward op.
// CHECK-LABEL: func.func @live_cotangent
// CHECK: kiln.linear_backward_data
func.func @live_cotangent(%g: tensor<2x3x5xf32>, %w: tensor<5x4xf32>) -> tensor<2x3x4xf32> {
  %dx = kiln.linear_backward_data %g, %w {fqn = "layers.0.attention.wq"} : (tensor<2x3x5xf32>, tensor<5x4xf32>) -> tensor<2x3x4xf32>
  return %dx : tensor<2x3x4xf32>
}

// Both of rope's cotangents must be zero; one is not enough.
// CHECK-LABEL: func.func @rope_half_zero
// CHECK: kiln.rope_backward
func.func @rope_half_zero(%dq: tensor<1x2x2x4xf32>, %cache: tensor<2x8xf32>) -> tensor<1x2x2x4xf32> {
  %z = kiln.constant {fqn = "rope.zero_grad", value = dense<0.0> : tensor<1x2x2x4xf32>} : tensor<1x2x2x4xf32>
  %q, %k = kiln.rope_backward %dq, %z, %cache {fqn = "rope"} : (tensor<1x2x2x4xf32>, tensor<1x2x2x4xf32>, tensor<2x8xf32>) -> (tensor<1x2x2x4xf32>, tensor<1x2x2x4xf32>)
  return %q : tensor<1x2x2x4xf32>
}

// CHECK-LABEL: func.func @add_zero
// CHECK-NOT: kiln.add
// CHECK: return %arg0
func.func @add_zero(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %z = kiln.constant {fqn = "z", value = dense<0.0> : tensor<2x4xf32>} : tensor<2x4xf32>
  %s = kiln.add %z, %x {fqn = "h.grad_accum"} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  return %s : tensor<2x4xf32>
}

// The router's backward with both cotangents zero (no aux loss, no weights'
// gradient) folds to zero logits gradients.
// CHECK-LABEL: func.func @router_zero_cotangents
// CHECK-NOT: kiln.router_backward
// CHECK: %[[Z:.*]] = kiln.constant {fqn = "layers.0.moe.router.zero_grad", value = dense<0.000000e+00> : tensor<2x3x4xf32>} : tensor<2x3x4xf32>
// CHECK: return %[[Z]]
func.func @router_zero_cotangents(%p: tensor<2x3x4xf32>, %ids: tensor<2x3x2xi64>) -> tensor<2x3x4xf32> {
  %dw = kiln.constant {fqn = "layers.0.moe.router.zero_grad", value = dense<0.0> : tensor<2x3x2xf32>} : tensor<2x3x2xf32>
  %dp = kiln.constant {fqn = "layers.0.moe.router.zero_grad", value = dense<0.0> : tensor<2x3x4xf32>} : tensor<2x3x4xf32>
  %d = kiln.router_backward %p, %ids, %dw, %dp {norm_topk_prob, fqn = "layers.0.moe.router"} : (tensor<2x3x4xf32>, tensor<2x3x2xi64>, tensor<2x3x2xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  return %d : tensor<2x3x4xf32>
}

// A zero result cotangent zeroes all five gradients of the grouped experts,
// the routing weights' (f32) beside the bf16 ones.
// CHECK-LABEL: func.func @grouped_experts_zero_cotangent
// CHECK-NOT: kiln.grouped_experts_backward
// CHECK: %[[DX:.*]] = kiln.constant {fqn = "layers.0.moe.experts.zero_grad", value = dense<0.000000e+00> : tensor<2x3x8xbf16>}
// CHECK: %[[DW:.*]] = kiln.constant {fqn = "layers.0.moe.experts.zero_grad", value = dense<0.000000e+00> : tensor<2x3x2xf32>}
// CHECK: %[[DW1:.*]] = kiln.constant {fqn = "layers.0.moe.experts.zero_grad", value = dense<0.000000e+00> : tensor<4x6x8xbf16>}
// CHECK: %[[DW3:.*]] = kiln.constant {fqn = "layers.0.moe.experts.zero_grad", value = dense<0.000000e+00> : tensor<4x6x8xbf16>}
// CHECK: %[[DW2:.*]] = kiln.constant {fqn = "layers.0.moe.experts.zero_grad", value = dense<0.000000e+00> : tensor<4x8x6xbf16>}
// CHECK: return %[[DX]], %[[DW]], %[[DW1]], %[[DW3]], %[[DW2]]
func.func @grouped_experts_zero_cotangent(%x: tensor<2x3x8xbf16>, %w: tensor<2x3x2xf32>, %ids: tensor<2x3x2xi32>,
                                          %w1: tensor<4x6x8xbf16>, %w3: tensor<4x6x8xbf16>, %w2: tensor<4x8x6xbf16>)
    -> (tensor<2x3x8xbf16>, tensor<2x3x2xf32>, tensor<4x6x8xbf16>, tensor<4x6x8xbf16>, tensor<4x8x6xbf16>) {
  %dy = kiln.constant {fqn = "layers.0.ffn_residual.zero_grad", value = dense<0.0> : tensor<2x3x8xbf16>} : tensor<2x3x8xbf16>
  %dx, %dw, %dw1, %dw3, %dw2 = kiln.grouped_experts_backward %dy, %x, %w, %ids, %w1, %w3, %w2 {fqn = "layers.0.moe.experts"} : (tensor<2x3x8xbf16>, tensor<2x3x8xbf16>, tensor<2x3x2xf32>, tensor<2x3x2xi32>, tensor<4x6x8xbf16>, tensor<4x6x8xbf16>, tensor<4x8x6xbf16>) -> (tensor<2x3x8xbf16>, tensor<2x3x2xf32>, tensor<4x6x8xbf16>, tensor<4x6x8xbf16>, tensor<4x8x6xbf16>)
  return %dx, %dw, %dw1, %dw3, %dw2 : tensor<2x3x8xbf16>, tensor<2x3x2xf32>, tensor<4x6x8xbf16>, tensor<4x6x8xbf16>, tensor<4x8x6xbf16>
}

// Only the weights' cotangent is zero: the probs' (the aux loss) keeps the
// router's backward.
// CHECK-LABEL: func.func @router_half_zero
// CHECK: kiln.router_backward
func.func @router_half_zero(%p: tensor<2x3x4xf32>, %ids: tensor<2x3x2xi64>, %dp: tensor<2x3x4xf32>) -> tensor<2x3x4xf32> {
  %dw = kiln.constant {fqn = "layers.0.moe.router.zero_grad", value = dense<0.0> : tensor<2x3x2xf32>} : tensor<2x3x2xf32>
  %d = kiln.router_backward %p, %ids, %dw, %dp {fqn = "layers.0.moe.router"} : (tensor<2x3x4xf32>, tensor<2x3x2xi64>, tensor<2x3x2xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  return %d : tensor<2x3x4xf32>
}

// -----

// A transpose undone by the next one folds away; so does the identity.
// CHECK-LABEL: func.func @transpose_pair
// CHECK-NOT: kiln.transpose
// CHECK: return %arg0
func.func @transpose_pair(%x: tensor<1x256x2x8xf32>) -> tensor<1x256x2x8xf32> {
  %a = kiln.transpose %x {permutation = array<i64: 0, 2, 1, 3>, fqn = "t"} : (tensor<1x256x2x8xf32>) -> tensor<1x2x256x8xf32>
  %b = kiln.transpose %a {permutation = array<i64: 0, 2, 1, 3>, fqn = "t"} : (tensor<1x2x256x8xf32>) -> tensor<1x256x2x8xf32>
  %c = kiln.transpose %b {permutation = array<i64: 0, 1, 2, 3>, fqn = "t"} : (tensor<1x256x2x8xf32>) -> tensor<1x256x2x8xf32>
  return %c : tensor<1x256x2x8xf32>
}
