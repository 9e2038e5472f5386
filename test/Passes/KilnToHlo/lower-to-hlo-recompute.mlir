// kiln-lower-to-hlo and activation checkpointing: each layer's recomputation
// (the kiln.recomputed clones kiln-activation-checkpoint puts before the
// layer's first backward op) reads what it takes from before it (here the
// saved layer input, the norm weight and the projection weight) through one
// hlo.opt_barrier, together with the cotangent the layer's backward starts
// from. So CSE cannot merge the recomputed dot with the forward's (two dots
// remain) and XLA cannot run it before the cotangent exists.
// RUN: kiln-opt %s --kiln-lower-to-hlo --cse | FileCheck %s

// CHECK-LABEL: func.func @train_step(
// CHECK-SAME: %[[X:[^:]*]]: tensor<2x3x8xf32>, %[[W:[^:]*]]: tensor<8xf32>, %[[W1:[^:]*]]: tensor<12x8xf32>, %[[DY:[^:]*]]: tensor<2x3x12xf32>
// The forward.
// CHECK: hlo.dot_general
// The backward so far: the cotangent.
// CHECK: %[[G:.*]] = hlo.add %[[DY]], %[[DY]]
// CHECK: %[[B:.*]]:4 = hlo.opt_barrier %[[X]], %[[W]], %[[W1]], %[[G]] : (tensor<2x3x8xf32>, tensor<8xf32>, tensor<12x8xf32>, tensor<2x3x12xf32>) -> (tensor<2x3x8xf32>, tensor<8xf32>, tensor<12x8xf32>, tensor<2x3x12xf32>)
// The recomputation reads only the barrier's results.
// CHECK-NOT: %[[X]]
// CHECK-NOT: %[[W1]]
// CHECK: hlo.multiply %[[B]]#0, %[[B]]#0
// CHECK-NOT: %[[X]]
// CHECK-NOT: %[[W1]]
// CHECK: hlo.dot_general %{{.*}}, %[[B]]#2
// CHECK: return
module {
  func.func @train_step(%x: tensor<2x3x8xf32>, %w: tensor<8xf32>, %w1: tensor<12x8xf32>,
                        %dy: tensor<2x3x12xf32>) -> (tensor<2x3x12xf32>, tensor<2x3x12xf32>) {
    %n = kiln.rms_norm %x, %w {eps = 1.0e-6 : f32, fqn = "layers.0.attention_norm"} : (tensor<2x3x8xf32>, tensor<8xf32>) -> tensor<2x3x8xf32>
    %a = kiln.linear %n, %w1 {fqn = "layers.0.feed_forward.w1"} : (tensor<2x3x8xf32>, tensor<12x8xf32>) -> tensor<2x3x12xf32>
    %g = kiln.add %dy, %dy {fqn = "output"} : (tensor<2x3x12xf32>, tensor<2x3x12xf32>) -> tensor<2x3x12xf32>
    %n2 = kiln.rms_norm %x, %w {eps = 1.0e-6 : f32, fqn = "layers.0.attention_norm", kiln.recomputed} : (tensor<2x3x8xf32>, tensor<8xf32>) -> tensor<2x3x8xf32>
    %a2 = kiln.linear %n2, %w1 {fqn = "layers.0.feed_forward.w1", kiln.recomputed} : (tensor<2x3x8xf32>, tensor<12x8xf32>) -> tensor<2x3x12xf32>
    %d = kiln.swiglu %g, %a2 {fqn = "layers.0.feed_forward"} : (tensor<2x3x12xf32>, tensor<2x3x12xf32>) -> tensor<2x3x12xf32>
    return %a, %d : tensor<2x3x12xf32>, tensor<2x3x12xf32>
  }
}
