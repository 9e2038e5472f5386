// kiln-fuse-elementwise: a cheap producer of several consumers is recomputed
// in each (AdamW's clipped gradient, read by both moments and the update, is
// never written), a producer fuses into a reduction that reads each of its
// elements once (a gradient norm's squares), and a producer a dot would
// recompute on every contraction step stays a tensor of its own.
// RUN: kiln-opt %s --kiln-convert-hlo-to-linalg=blas=false --kiln-fuse-elementwise | FileCheck %s
// RUN: kiln-opt %s --kiln-convert-hlo-to-linalg=blas=false --kiln-fuse-elementwise=max-recomputed-ops=0 \
// RUN:   | FileCheck %s --check-prefix=NORECOMPUTE

// The clipped gradient g * s: three consumers, each recomputes it; the
// squares fuse into the norm's reduction. Four loop nests, each writing only
// a result (and the sums).
// CHECK-LABEL: func.func @adamw
// CHECK: linalg.generic {{.*}} iterator_types = ["reduction", "reduction"]
// CHECK-NEXT: ^bb0
// CHECK-NEXT: arith.mulf
// CHECK: linalg.generic {{.*}} ins(%{{.*}} : tensor<f64>)
// CHECK-COUNT-3: linalg.generic {{.*}} ins(%{{.*}}, %{{.*}}, %{{.*}} : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>)
// CHECK-NOT: linalg.generic
// CHECK: return
// Without recomputation the clipped gradient is a tensor the three read:
// six loop nests (the rounding of the sum is one in both).
// NORECOMPUTE-LABEL: func.func @adamw
// NORECOMPUTE-COUNT-6: linalg.generic
// NORECOMPUTE-NOT: linalg.generic
// NORECOMPUTE: return
func.func @adamw(%g: tensor<4x8xf32>, %s: tensor<4x8xf32>, %m: tensor<4x8xf32>,
                 %v: tensor<4x8xf32>, %p: tensor<4x8xf32>)
    -> (tensor<f32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) {
  %zero = hlo.constant {value = dense<0.0> : tensor<f32>} : tensor<f32>
  %sq = hlo.multiply %g, %g : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %norm = hlo.reduce %sq, %zero {dimensions = array<i64: 0, 1>, combiner = #hlo<combiner add>} : (tensor<4x8xf32>, tensor<f32>) -> tensor<f32>
  %c = hlo.multiply %g, %s : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %m1 = hlo.add %m, %c : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %c2 = hlo.multiply %c, %c : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %v1 = hlo.add %v, %c2 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %p1 = hlo.subtract %p, %c : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %norm, %m1, %v1, %p1 : tensor<f32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
}

// exp(x) read by a dot (contracting over its columns) and by an add: a dot
// would recompute each exp once per output column, so it stays a tensor.
// CHECK-LABEL: func.func @dot_operand
// CHECK: linalg.generic
// CHECK: math.exp
// CHECK: linalg.yield
// CHECK: linalg.matmul
func.func @dot_operand(%x: tensor<4x8xf32>, %w: tensor<8x3xf32>) -> (tensor<4x3xf32>, tensor<4x8xf32>) {
  %e = hlo.exp %x : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %y = hlo.dot_general %e, %w {lhs_batching_dimensions = array<i64>, rhs_batching_dimensions = array<i64>, lhs_contracting_dimensions = array<i64: 1>, rhs_contracting_dimensions = array<i64: 0>} : (tensor<4x8xf32>, tensor<8x3xf32>) -> tensor<4x3xf32>
  %z = hlo.add %e, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %y, %z : tensor<4x3xf32>, tensor<4x8xf32>
}
