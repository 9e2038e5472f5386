// The pipeline's Linalg stage (kiln-opt --kiln-hlo-to-linalg): the hlo ops
// become linalg on tensors, then each chain of elementwise ops and
// broadcasts fuses into one linalg.generic that writes one tensor. An RMS
// norm, x * rsqrt(mean(x^2)) * w: the square fuses into the reduction (a
// generic with a reduction iterator, summing in f64), and the rounding of
// the sum, the mean, the rsqrt, both broadcasts and both products become one
// loop nest (fusing through a broadcast computes the rsqrt per element:
// cheaper than a buffer). Two loop nests, no tensor between them but the sums.
// RUN: kiln-opt %s --kiln-hlo-to-linalg | FileCheck %s
// RUN: kiln-opt %s --kiln-convert-hlo-to-linalg | FileCheck %s --check-prefix=UNFUSED

// CHECK-LABEL: func.func @rms_norm
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]
// CHECK: arith.mulf
// CHECK: arith.extf
// CHECK: arith.addf
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "parallel"]
// CHECK: arith.truncf
// CHECK: math.rsqrt
// CHECK: arith.mulf
// CHECK: arith.mulf
// CHECK-NOT: linalg.generic
// CHECK: return
// UNFUSED-COUNT-8: linalg.generic
func.func @rms_norm(%x: tensor<2x4xf32>, %w: tensor<4xf32>) -> tensor<2x4xf32> {
  %sq = hlo.multiply %x, %x : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %zero = hlo.constant {value = dense<0.0> : tensor<f32>} : tensor<f32>
  %sum = hlo.reduce %sq, %zero {dimensions = array<i64: 1>, combiner = #hlo<combiner add>} : (tensor<2x4xf32>, tensor<f32>) -> tensor<2xf32>
  %n = hlo.constant {value = dense<0.25> : tensor<2xf32>} : tensor<2xf32>
  %mean = hlo.multiply %sum, %n : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  %r = hlo.rsqrt %mean : (tensor<2xf32>) -> tensor<2xf32>
  %rb = hlo.broadcast_in_dim %r {broadcast_dimensions = array<i64: 0>} : (tensor<2xf32>) -> tensor<2x4xf32>
  %wb = hlo.broadcast_in_dim %w {broadcast_dimensions = array<i64: 1>} : (tensor<4xf32>) -> tensor<2x4xf32>
  %y = hlo.multiply %x, %rb : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %z = hlo.multiply %y, %wb : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  return %z : tensor<2x4xf32>
}
