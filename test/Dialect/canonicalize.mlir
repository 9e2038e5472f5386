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
