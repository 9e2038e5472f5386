// kiln-convert-hlo-to-linalg{blas=false}, contractions and reductions:
// dot_general as linalg.matmul, linalg.batch_matmul or (other dimension
// numbers, bf16 operands of a float32 dot) a linalg.generic; reduce as a
// linalg.generic with reduction iterators from its init value (float sums
// accumulated in f64), which elementwise producers fuse into. The IR
// is checked, then lowered to LLVM and run (mlir-runner, which has no
// kiln_sgemm: blas.mlir checks that path) against values worked out by hand.
// RUN: kiln-opt %s --kiln-convert-hlo-to-linalg=blas=false | FileCheck %s
// RUN: kiln-opt %s --kiln-convert-hlo-to-linalg=blas=false | kiln-opt --kiln-hlo-to-llvm \
// RUN:   | mlir-runner -e main -entry-point-result=void \
// RUN:   -shared-libs=%mlir_runner_utils | FileCheck %s --check-prefix=OUT

func.func private @printMemrefF32(memref<*xf32>) attributes {llvm.emit_c_interface}
func.func private @printMemrefI32(memref<*xi32>) attributes {llvm.emit_c_interface}
func.func @print(%t: tensor<*xf32>) {
  %m = bufferization.to_buffer %t read_only : tensor<*xf32> to memref<*xf32>
  call @printMemrefF32(%m) : (memref<*xf32>) -> ()
  return
}
func.func @printI(%t: tensor<*xi32>) {
  %m = bufferization.to_buffer %t read_only : tensor<*xi32> to memref<*xi32>
  call @printMemrefI32(%m) : (memref<*xi32>) -> ()
  return
}

// CHECK-LABEL: func.func @main
// CHECK-NOT: hlo.
func.func @main() {
  %a = hlo.constant {value = dense<[[1.0, 2.0], [3.0, 4.0]]> : tensor<2x2xf32>} : tensor<2x2xf32>
  %b = hlo.constant {value = dense<[[5.0, 6.0], [7.0, 8.0]]> : tensor<2x2xf32>} : tensor<2x2xf32>

  // CHECK: linalg.matmul
  // OUT: sizes = [2, 2]
  // OUT-NEXT: {{\[\[}}19, 22],
  // OUT-NEXT:  [43, 50]]
  %mm = hlo.dot_general %a, %b {lhs_batching_dimensions = array<i64>, rhs_batching_dimensions = array<i64>, lhs_contracting_dimensions = array<i64: 1>, rhs_contracting_dimensions = array<i64: 0>} : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
  %p0 = tensor.cast %mm : tensor<2x2xf32> to tensor<*xf32>
  call @print(%p0) : (tensor<*xf32>) -> ()

  // x W^T, the linear layer's form: a generic with a reduction loop.
  // CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "reduction"]
  // OUT: sizes = [2, 2]
  // OUT-NEXT: {{\[\[}}17, 23],
  // OUT-NEXT:  [39, 53]]
  %nt = hlo.dot_general %a, %b {lhs_batching_dimensions = array<i64>, rhs_batching_dimensions = array<i64>, lhs_contracting_dimensions = array<i64: 1>, rhs_contracting_dimensions = array<i64: 1>} : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
  %p1 = tensor.cast %nt : tensor<2x2xf32> to tensor<*xf32>
  call @print(%p1) : (tensor<*xf32>) -> ()

  // CHECK: linalg.batch_matmul
  // OUT: sizes = [2]
  // OUT-NEXT: [17, 53]
  %l3 = hlo.reshape %a : (tensor<2x2xf32>) -> tensor<2x1x2xf32>
  %r3 = hlo.reshape %b : (tensor<2x2xf32>) -> tensor<2x2x1xf32>
  %bmm = hlo.dot_general %l3, %r3 {lhs_batching_dimensions = array<i64: 0>, rhs_batching_dimensions = array<i64: 0>, lhs_contracting_dimensions = array<i64: 2>, rhs_contracting_dimensions = array<i64: 1>} : (tensor<2x1x2xf32>, tensor<2x2x1xf32>) -> tensor<2x1x1xf32>
  %bmm1 = hlo.reshape %bmm : (tensor<2x1x1xf32>) -> tensor<2xf32>
  %p2 = tensor.cast %bmm1 : tensor<2xf32> to tensor<*xf32>
  call @print(%p2) : (tensor<*xf32>) -> ()

  // A batch dimension that is not the leading one: result[j] = sum_i a[i,j] b[i,j].
  // OUT: sizes = [2]
  // OUT-NEXT: [26, 44]
  %bt = hlo.dot_general %a, %b {lhs_batching_dimensions = array<i64: 1>, rhs_batching_dimensions = array<i64: 1>, lhs_contracting_dimensions = array<i64: 0>, rhs_contracting_dimensions = array<i64: 0>} : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2xf32>
  %p3 = tensor.cast %bt : tensor<2xf32> to tensor<*xf32>
  call @print(%p3) : (tensor<*xf32>) -> ()

  // bf16 operands, float32 accumulation and result.
  // CHECK: arith.extf {{.*}} : bf16 to f32
  // OUT: sizes = [2, 2]
  // OUT-NEXT: {{\[\[}}19, 22],
  // OUT-NEXT:  [43, 50]]
  %a16 = hlo.convert %a : (tensor<2x2xf32>) -> tensor<2x2xbf16>
  %b16 = hlo.convert %b : (tensor<2x2xf32>) -> tensor<2x2xbf16>
  %mm16 = hlo.dot_general %a16, %b16 {lhs_batching_dimensions = array<i64>, rhs_batching_dimensions = array<i64>, lhs_contracting_dimensions = array<i64: 1>, rhs_contracting_dimensions = array<i64: 0>} : (tensor<2x2xbf16>, tensor<2x2xbf16>) -> tensor<2x2xf32>
  %p4 = tensor.cast %mm16 : tensor<2x2xf32> to tensor<*xf32>
  call @print(%p4) : (tensor<*xf32>) -> ()

  %x = hlo.constant {value = dense<[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]> : tensor<2x3xf32>} : tensor<2x3xf32>
  %zero = hlo.constant {value = dense<0.0> : tensor<f32>} : tensor<f32>
  %ten = hlo.constant {value = dense<10.0> : tensor<f32>} : tensor<f32>
  %ninf = hlo.constant {value = dense<0xFF800000> : tensor<f32>} : tensor<f32>
  // A float sum accumulates in f64, then rounds once.
  // CHECK: iterator_types = ["parallel", "reduction"]} ins(%{{.*}} : tensor<2x3xf32>) outs(%{{.*}} : tensor<2xf64>)
  // CHECK: arith.extf %{{.*}} : f32 to f64
  // CHECK: arith.truncf %{{.*}} : f64 to f32
  // OUT: sizes = [2]
  // OUT-NEXT: [6, 15]
  %rows = hlo.reduce %x, %zero {dimensions = array<i64: 1>, combiner = #hlo<combiner add>} : (tensor<2x3xf32>, tensor<f32>) -> tensor<2xf32>
  %p5 = tensor.cast %rows : tensor<2xf32> to tensor<*xf32>
  call @print(%p5) : (tensor<*xf32>) -> ()
  // CHECK: iterator_types = ["reduction", "parallel"]} ins(%{{.*}} : tensor<2x3xf32>) outs(%{{.*}} : tensor<3xf32>)
  // CHECK: arith.maximumf
  // OUT: sizes = [3]
  // OUT-NEXT: [4, 5, 6]
  %cols = hlo.reduce %x, %ninf {dimensions = array<i64: 0>, combiner = #hlo<combiner max>} : (tensor<2x3xf32>, tensor<f32>) -> tensor<3xf32>
  %p6 = tensor.cast %cols : tensor<3xf32> to tensor<*xf32>
  call @print(%p6) : (tensor<*xf32>) -> ()
  // Every dimension, from a nonzero init: 10 + 21.
  // OUT: sizes = [1]
  // OUT-NEXT: [31]
  %all = hlo.reduce %x, %ten {dimensions = array<i64: 0, 1>, combiner = #hlo<combiner add>} : (tensor<2x3xf32>, tensor<f32>) -> tensor<f32>
  %all1 = hlo.reshape %all : (tensor<f32>) -> tensor<1xf32>
  %p7 = tensor.cast %all1 : tensor<1xf32> to tensor<*xf32>
  call @print(%p7) : (tensor<*xf32>) -> ()
  // CHECK: iterator_types = ["parallel", "reduction"]} ins(%{{.*}} : tensor<2x2xi32>)
  // CHECK: arith.minsi
  // OUT: sizes = [2]
  // OUT-NEXT: [-5, 2]
  %n = hlo.constant {value = dense<[[-1, -5], [3, 2]]> : tensor<2x2xi32>} : tensor<2x2xi32>
  %hundred = hlo.constant {value = dense<100> : tensor<i32>} : tensor<i32>
  %mins = hlo.reduce %n, %hundred {dimensions = array<i64: 1>, combiner = #hlo<combiner min>} : (tensor<2x2xi32>, tensor<i32>) -> tensor<2xi32>
  %p8 = tensor.cast %mins : tensor<2xi32> to tensor<*xi32>
  call @printI(%p8) : (tensor<*xi32>) -> ()
  return
}
