// kiln-convert-hlo-to-linalg, indexing: gather (start indices clamped into
// the operand, as XLA does) and scatter (an update whose window would leave
// the operand is skipped, as XLA skips it), with explicit and implicit index
// vector dimensions. The IR is checked, then run (mlir-runner) against
// values worked out by hand.
// RUN: kiln-opt %s --kiln-convert-hlo-to-linalg | FileCheck %s
// RUN: kiln-opt %s --kiln-hlo-to-llvm | mlir-runner -e main -entry-point-result=void \
// RUN:   -shared-libs=%mlir_runner_utils | FileCheck %s --check-prefix=OUT

func.func private @printMemrefF32(memref<*xf32>) attributes {llvm.emit_c_interface}
func.func @print(%t: tensor<*xf32>) {
  %m = bufferization.to_buffer %t read_only : tensor<*xf32> to memref<*xf32>
  call @printMemrefF32(%m) : (memref<*xf32>) -> ()
  return
}

// CHECK-LABEL: func.func @main
// CHECK-NOT: hlo.
func.func @main() {
  %t = hlo.constant {value = dense<[[0.0, 1.0], [10.0, 11.0], [20.0, 21.0]]> : tensor<3x2xf32>} : tensor<3x2xf32>

  // Rows by id (the embedding's form); id 7 is clamped to the last row.
  // CHECK: linalg.generic
  // CHECK: tensor.extract
  // OUT: sizes = [4, 2]
  // OUT-NEXT: {{\[\[}}20, 21],
  // OUT-NEXT:  [0, 1],
  // OUT-NEXT:  [20, 21],
  // OUT-NEXT:  [20, 21]]
  %ids = hlo.constant {value = dense<[[2], [0], [2], [7]]> : tensor<4x1xi32>} : tensor<4x1xi32>
  %g0 = hlo.gather %t, %ids {offset_dims = array<i64: 1>, collapsed_slice_dims = array<i64: 0>, start_index_map = array<i64: 0>, index_vector_dim = 1 : i64, slice_sizes = array<i64: 1, 2>} : (tensor<3x2xf32>, tensor<4x1xi32>) -> tensor<4x2xf32>
  %p0 = tensor.cast %g0 : tensor<4x2xf32> to tensor<*xf32>
  call @print(%p0) : (tensor<*xf32>) -> ()

  // The index vector dimension implicit (== the indices' rank).
  // OUT: sizes = [2, 2]
  // OUT-NEXT: {{\[\[}}10, 11],
  // OUT-NEXT:  [0, 1]]
  %flat = hlo.constant {value = dense<[1, 0]> : tensor<2xi32>} : tensor<2xi32>
  %g1 = hlo.gather %t, %flat {offset_dims = array<i64: 1>, collapsed_slice_dims = array<i64: 0>, start_index_map = array<i64: 0>, index_vector_dim = 1 : i64, slice_sizes = array<i64: 1, 2>} : (tensor<3x2xf32>, tensor<2xi32>) -> tensor<2x2xf32>
  %p1 = tensor.cast %g1 : tensor<2x2xf32> to tensor<*xf32>
  call @print(%p1) : (tensor<*xf32>) -> ()

  // One element per (row, column) pair: both dimensions collapsed.
  // OUT: sizes = [3]
  // OUT-NEXT: [1, 10, 21]
  %pairs = hlo.constant {value = dense<[[0, 1], [1, 0], [2, 1]]> : tensor<3x2xi32>} : tensor<3x2xi32>
  %g2 = hlo.gather %t, %pairs {offset_dims = array<i64>, collapsed_slice_dims = array<i64: 0, 1>, start_index_map = array<i64: 0, 1>, index_vector_dim = 1 : i64, slice_sizes = array<i64: 1, 1>} : (tensor<3x2xf32>, tensor<3x2xi32>) -> tensor<3xf32>
  %p2 = tensor.cast %g2 : tensor<3xf32> to tensor<*xf32>
  call @print(%p2) : (tensor<*xf32>) -> ()

  // Rows added by id (the embedding's gradient); id 5 is outside: skipped.
  // CHECK: scf.for
  // CHECK: scf.if
  // CHECK: tensor.insert
  // OUT: sizes = [3, 2]
  // OUT-NEXT: {{\[\[}}2, 2],
  // OUT-NEXT:  [0, 0],
  // OUT-NEXT:  [4, 4]]
  %zeros = hlo.constant {value = dense<0.0> : tensor<3x2xf32>} : tensor<3x2xf32>
  %sids = hlo.constant {value = dense<[[2], [0], [2], [5]]> : tensor<4x1xi32>} : tensor<4x1xi32>
  %upd = hlo.constant {value = dense<[[1.0, 1.0], [2.0, 2.0], [3.0, 3.0], [4.0, 4.0]]> : tensor<4x2xf32>} : tensor<4x2xf32>
  %s0 = hlo.scatter %zeros, %sids, %upd {update_window_dims = array<i64: 1>, inserted_window_dims = array<i64: 0>, scatter_dims_to_operand_dims = array<i64: 0>, index_vector_dim = 1 : i64, combiner = #hlo<combiner add>} : (tensor<3x2xf32>, tensor<4x1xi32>, tensor<4x2xf32>) -> tensor<3x2xf32>
  %p3 = tensor.cast %s0 : tensor<3x2xf32> to tensor<*xf32>
  call @print(%p3) : (tensor<*xf32>) -> ()

  // max into a nonzero operand, the index vector dimension implicit.
  // CHECK: arith.maximumf
  // OUT: sizes = [3, 2]
  // OUT-NEXT: {{\[\[}}0, 1],
  // OUT-NEXT:  [15, 17],
  // OUT-NEXT:  [20, 21]]
  %twice = hlo.constant {value = dense<[1, 1]> : tensor<2xi32>} : tensor<2xi32>
  %upd1 = hlo.constant {value = dense<[[15.0, -1.0], [3.0, 17.0]]> : tensor<2x2xf32>} : tensor<2x2xf32>
  %s1 = hlo.scatter %t, %twice, %upd1 {update_window_dims = array<i64: 1>, inserted_window_dims = array<i64: 0>, scatter_dims_to_operand_dims = array<i64: 0>, index_vector_dim = 1 : i64, combiner = #hlo<combiner max>} : (tensor<3x2xf32>, tensor<2xi32>, tensor<2x2xf32>) -> tensor<3x2xf32>
  %p4 = tensor.cast %s1 : tensor<3x2xf32> to tensor<*xf32>
  call @print(%p4) : (tensor<*xf32>) -> ()
  // The operand itself is unchanged by the scatter into its copy.
  // OUT: sizes = [3, 2]
  // OUT-NEXT: {{\[\[}}0, 1],
  // OUT-NEXT:  [10, 11],
  // OUT-NEXT:  [20, 21]]
  %p5 = tensor.cast %t : tensor<3x2xf32> to tensor<*xf32>
  call @print(%p5) : (tensor<*xf32>) -> ()
  return
}
