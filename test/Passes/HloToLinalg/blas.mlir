// kiln-convert-hlo-to-linalg, float32 dots of the matmul form: a call of the
// host's kiln_sgemm with the table [batch, m, n, k, transposeA, transposeB,
// A, B, C] (kiln/Passes/HloToLinalg/HostCalls.h); other dots stay linalg.
// The numbers: CompiledStepTest (against the evaluator) and
// check-hlo-compiled.test (the whole step against the CPU runtime).
// RUN: kiln-opt %s --kiln-convert-hlo-to-linalg | FileCheck %s
// RUN: kiln-opt %s --kiln-convert-hlo-to-linalg=blas=false | FileCheck %s --check-prefix=OFF

// CHECK: func.func private @kiln_sgemm(memref<?xi64>) attributes {llvm.emit_c_interface}
// OFF-NOT: kiln_sgemm
// CHECK-LABEL: func.func @dots
func.func @dots(%x: tensor<2x32x64xf32>, %w: tensor<128x64xf32>, %v: tensor<64x128xf32>,
                %dy: tensor<2x32x128xf32>, %q: tensor<3x4x8xf32>, %k: tensor<3x8x5xf32>,
                %kt: tensor<4x3x8xf32>)
    -> (tensor<2x32x128xf32>, tensor<2x32x128xf32>, tensor<64x128xf32>, tensor<3x4x5xf32>,
        tensor<3x4x4xf32>) {
  // x W^T, the linear layer's forward: m = 64 rows, n = 128, k = 64, B transposed.
  // CHECK: arith.constant 1 : i64
  // CHECK-NEXT: arith.constant 64 : i64
  // CHECK-NEXT: arith.constant 128 : i64
  // CHECK-NEXT: arith.constant 64 : i64
  // CHECK-NEXT: arith.constant 0 : i64
  // CHECK-NEXT: arith.constant 1 : i64
  // CHECK: memref.alloca() : memref<9xi64>
  // CHECK: call @kiln_sgemm
  // CHECK: bufferization.to_tensor {{.*}} : memref<2x32x128xf32> to tensor<2x32x128xf32>
  %y = hlo.dot_general %x, %w {lhs_batching_dimensions = array<i64>, rhs_batching_dimensions = array<i64>, lhs_contracting_dimensions = array<i64: 2>, rhs_contracting_dimensions = array<i64: 1>} : (tensor<2x32x64xf32>, tensor<128x64xf32>) -> tensor<2x32x128xf32>
  // x V: B as stored.
  // CHECK: arith.constant 0 : i64
  // CHECK-NEXT: arith.constant 0 : i64
  // CHECK: call @kiln_sgemm
  %z = hlo.dot_general %x, %v {lhs_batching_dimensions = array<i64>, rhs_batching_dimensions = array<i64>, lhs_contracting_dimensions = array<i64: 2>, rhs_contracting_dimensions = array<i64: 0>} : (tensor<2x32x64xf32>, tensor<64x128xf32>) -> tensor<2x32x128xf32>
  // The weight gradient x^T dy: both contract their leading dimensions, A transposed.
  // CHECK: arith.constant 1 : i64
  // CHECK-NEXT: arith.constant 64 : i64
  // CHECK-NEXT: arith.constant 128 : i64
  // CHECK-NEXT: arith.constant 64 : i64
  // CHECK-NEXT: arith.constant 1 : i64
  // CHECK-NEXT: arith.constant 0 : i64
  // CHECK: call @kiln_sgemm
  %dw = hlo.dot_general %x, %dy {lhs_batching_dimensions = array<i64>, rhs_batching_dimensions = array<i64>, lhs_contracting_dimensions = array<i64: 0, 1>, rhs_contracting_dimensions = array<i64: 0, 1>} : (tensor<2x32x64xf32>, tensor<2x32x128xf32>) -> tensor<64x128xf32>
  // A leading batch dimension: 3 matmuls.
  // CHECK: arith.constant 3 : i64
  // CHECK-NEXT: arith.constant 4 : i64
  // CHECK-NEXT: arith.constant 5 : i64
  // CHECK-NEXT: arith.constant 8 : i64
  // CHECK: call @kiln_sgemm
  %s = hlo.dot_general %q, %k {lhs_batching_dimensions = array<i64: 0>, rhs_batching_dimensions = array<i64: 0>, lhs_contracting_dimensions = array<i64: 2>, rhs_contracting_dimensions = array<i64: 1>} : (tensor<3x4x8xf32>, tensor<3x8x5xf32>) -> tensor<3x4x5xf32>
  // A batch dimension that is not leading (attention's form) stays linalg.
  // CHECK-NOT: call @kiln_sgemm
  // CHECK: linalg.generic
  %a = hlo.dot_general %q, %kt {lhs_batching_dimensions = array<i64: 0>, rhs_batching_dimensions = array<i64: 1>, lhs_contracting_dimensions = array<i64: 2>, rhs_contracting_dimensions = array<i64: 2>} : (tensor<3x4x8xf32>, tensor<4x3x8xf32>) -> tensor<3x4x4xf32>
  return %y, %z, %dw, %s, %a : tensor<2x32x128xf32>, tensor<2x32x128xf32>, tensor<64x128xf32>, tensor<3x4x5xf32>, tensor<3x4x4xf32>
}
// Without blas: loops (the batched one linalg.batch_matmul).
// OFF-COUNT-3: linalg.generic
// OFF: linalg.batch_matmul
// OFF: linalg.generic
