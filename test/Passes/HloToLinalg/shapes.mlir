// kiln-convert-hlo-to-linalg, data movement: broadcast_in_dim, reshape,
// transpose, slice, dynamic_slice (start indices clamped as XLA clamps
// them), concatenate, pad (negative edges, interior padding), opt_barrier.
// The IR is checked, then run (mlir-runner) against values worked out by
// hand.
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
  %x = hlo.constant {value = dense<[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]> : tensor<2x3xf32>} : tensor<2x3xf32>
  %v = hlo.constant {value = dense<[1.0, 2.0, 3.0]> : tensor<3xf32>} : tensor<3xf32>

  // A vector along the rows; a size-1 dimension stretched; a scalar.
  // CHECK: linalg.generic
  // OUT: sizes = [2, 3]
  // OUT-NEXT: {{\[\[}}1, 2, 3],
  // OUT-NEXT:  [1, 2, 3]]
  %b0 = hlo.broadcast_in_dim %v {broadcast_dimensions = array<i64: 1>} : (tensor<3xf32>) -> tensor<2x3xf32>
  %p0 = tensor.cast %b0 : tensor<2x3xf32> to tensor<*xf32>
  call @print(%p0) : (tensor<*xf32>) -> ()
  // OUT: sizes = [2, 3]
  // OUT-NEXT: {{\[\[}}7, 7, 7],
  // OUT-NEXT:  [8, 8, 8]]
  %c = hlo.constant {value = dense<[[7.0], [8.0]]> : tensor<2x1xf32>} : tensor<2x1xf32>
  %b1 = hlo.broadcast_in_dim %c {broadcast_dimensions = array<i64: 0, 1>} : (tensor<2x1xf32>) -> tensor<2x3xf32>
  %p1 = tensor.cast %b1 : tensor<2x3xf32> to tensor<*xf32>
  call @print(%p1) : (tensor<*xf32>) -> ()
  // OUT: sizes = [2]
  // OUT-NEXT: [5, 5]
  %s = hlo.constant {value = dense<5.0> : tensor<f32>} : tensor<f32>
  %b2 = hlo.broadcast_in_dim %s {broadcast_dimensions = array<i64>} : (tensor<f32>) -> tensor<2xf32>
  %p2 = tensor.cast %b2 : tensor<2xf32> to tensor<*xf32>
  call @print(%p2) : (tensor<*xf32>) -> ()

  // Row-major reshapes, through one dimension; to and from 0-d.
  // CHECK: tensor.collapse_shape
  // CHECK: tensor.expand_shape
  // OUT: sizes = [3, 2]
  // OUT-NEXT: {{\[\[}}1, 2],
  // OUT-NEXT:  [3, 4],
  // OUT-NEXT:  [5, 6]]
  %r0 = hlo.reshape %x : (tensor<2x3xf32>) -> tensor<3x2xf32>
  %p3 = tensor.cast %r0 : tensor<3x2xf32> to tensor<*xf32>
  call @print(%p3) : (tensor<*xf32>) -> ()
  // OUT: sizes = [1]
  // OUT-NEXT: [9]
  %nine = hlo.constant {value = dense<9.0> : tensor<1x1xf32>} : tensor<1x1xf32>
  %r1 = hlo.reshape %nine : (tensor<1x1xf32>) -> tensor<f32>
  %r2 = hlo.reshape %r1 : (tensor<f32>) -> tensor<1xf32>
  %p4 = tensor.cast %r2 : tensor<1xf32> to tensor<*xf32>
  call @print(%p4) : (tensor<*xf32>) -> ()

  // CHECK: linalg.transpose
  // OUT: sizes = [3, 2]
  // OUT-NEXT: {{\[\[}}1, 4],
  // OUT-NEXT:  [2, 5],
  // OUT-NEXT:  [3, 6]]
  %t = hlo.transpose %x {permutation = array<i64: 1, 0>} : (tensor<2x3xf32>) -> tensor<3x2xf32>
  %p5 = tensor.cast %t : tensor<3x2xf32> to tensor<*xf32>
  call @print(%p5) : (tensor<*xf32>) -> ()

  // A strided slice; dynamic slices whose starts are clamped into the
  // operand (column 2 of width 2 starts at 1; row -1 at 0).
  // CHECK: tensor.extract_slice %{{.*}}[0, 0] [2, 2] [1, 2]
  // OUT: sizes = [2, 2]
  // OUT-NEXT: {{\[\[}}1, 3],
  // OUT-NEXT:  [4, 6]]
  %sl = hlo.slice %x {start_indices = array<i64: 0, 0>, limit_indices = array<i64: 2, 3>, strides = array<i64: 1, 2>} : (tensor<2x3xf32>) -> tensor<2x2xf32>
  %p6 = tensor.cast %sl : tensor<2x2xf32> to tensor<*xf32>
  call @print(%p6) : (tensor<*xf32>) -> ()
  // CHECK: arith.maxsi
  // CHECK: arith.minsi
  // OUT: sizes = [1, 2]
  // OUT-NEXT: {{\[\[}}5, 6]]
  %one = hlo.constant {value = dense<1> : tensor<i32>} : tensor<i32>
  %two = hlo.constant {value = dense<2> : tensor<i32>} : tensor<i32>
  %ds0 = hlo.dynamic_slice %x, %one, %two {slice_sizes = array<i64: 1, 2>} : (tensor<2x3xf32>, tensor<i32>, tensor<i32>) -> tensor<1x2xf32>
  %p7 = tensor.cast %ds0 : tensor<1x2xf32> to tensor<*xf32>
  call @print(%p7) : (tensor<*xf32>) -> ()
  // OUT: sizes = [2, 2]
  // OUT-NEXT: {{\[\[}}1, 2],
  // OUT-NEXT:  [4, 5]]
  %minus = hlo.constant {value = dense<-1> : tensor<i32>} : tensor<i32>
  %zero = hlo.constant {value = dense<0> : tensor<i32>} : tensor<i32>
  %ds1 = hlo.dynamic_slice %x, %minus, %zero {slice_sizes = array<i64: 2, 2>} : (tensor<2x3xf32>, tensor<i32>, tensor<i32>) -> tensor<2x2xf32>
  %p8 = tensor.cast %ds1 : tensor<2x2xf32> to tensor<*xf32>
  call @print(%p8) : (tensor<*xf32>) -> ()

  // CHECK: tensor.insert_slice
  // OUT: sizes = [2, 4]
  // OUT-NEXT: {{\[\[}}1, 2, 3, 0],
  // OUT-NEXT:  [4, 5, 6, 0]]
  %col = hlo.constant {value = dense<0.0> : tensor<2x1xf32>} : tensor<2x1xf32>
  %cat = hlo.concatenate %x, %col {dimension = 1 : i64} : (tensor<2x3xf32>, tensor<2x1xf32>) -> tensor<2x4xf32>
  %p9 = tensor.cast %cat : tensor<2x4xf32> to tensor<*xf32>
  call @print(%p9) : (tensor<*xf32>) -> ()
  // OUT: sizes = [3, 3]
  // OUT-NEXT: {{\[\[}}1, 2, 3],
  // OUT-NEXT:  [4, 5, 6],
  // OUT-NEXT:  [1, 2, 3]]
  %row = hlo.reshape %v : (tensor<3xf32>) -> tensor<1x3xf32>
  %cat0 = hlo.concatenate %x, %row {dimension = 0 : i64} : (tensor<2x3xf32>, tensor<1x3xf32>) -> tensor<3x3xf32>
  %p10 = tensor.cast %cat0 : tensor<3x3xf32> to tensor<*xf32>
  call @print(%p10) : (tensor<*xf32>) -> ()

  // pad: edges and interior; a negative edge drops operand elements.
  // CHECK: linalg.fill
  // CHECK: tensor.insert_slice %{{.*}}[1] [3] [2]
  // OUT: sizes = [8]
  // OUT-NEXT: [0, 1, 0, 2, 0, 3, 0, 0]
  %pz = hlo.constant {value = dense<0.0> : tensor<f32>} : tensor<f32>
  %pad0 = hlo.pad %v, %pz {edge_padding_low = array<i64: 1>, edge_padding_high = array<i64: 2>, interior_padding = array<i64: 1>} : (tensor<3xf32>, tensor<f32>) -> tensor<8xf32>
  %p11 = tensor.cast %pad0 : tensor<8xf32> to tensor<*xf32>
  call @print(%p11) : (tensor<*xf32>) -> ()
  // OUT: sizes = [3, 5]
  // OUT-NEXT: {{\[\[}}0, 2, 0, 3, 0],
  // OUT-NEXT:  [0, 5, 0, 6, 0],
  // OUT-NEXT:  [0, 0, 0, 0, 0]]
  %pad1 = hlo.pad %x, %pz {edge_padding_low = array<i64: 0, -1>, edge_padding_high = array<i64: 1, 1>, interior_padding = array<i64: 0, 1>} : (tensor<2x3xf32>, tensor<f32>) -> tensor<3x5xf32>
  %p12 = tensor.cast %pad1 : tensor<3x5xf32> to tensor<*xf32>
  call @print(%p12) : (tensor<*xf32>) -> ()

  // An opt-barrier is its operands.
  // OUT: sizes = [3]
  // OUT-NEXT: [1, 2, 3]
  %bar:2 = hlo.opt_barrier %x, %v : (tensor<2x3xf32>, tensor<3xf32>) -> (tensor<2x3xf32>, tensor<3xf32>)
  %p13 = tensor.cast %bar#1 : tensor<3xf32> to tensor<*xf32>
  call @print(%p13) : (tensor<*xf32>) -> ()
  return
}
