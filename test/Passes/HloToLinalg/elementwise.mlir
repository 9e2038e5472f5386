// kiln-convert-hlo-to-linalg, elementwise family: constant, iota, the
// unary and binary ops, convert, compare, select. The IR is checked, then
// lowered to LLVM (kiln-hlo-to-llvm), run by mlir-runner and the printed
// values checked against values worked out by hand (libm's to 6 digits).
// RUN: kiln-opt %s --kiln-convert-hlo-to-linalg | FileCheck %s
// RUN: kiln-opt %s --kiln-hlo-to-llvm | mlir-runner -e main -entry-point-result=void \
// RUN:   -shared-libs=%mlir_runner_utils | FileCheck %s --check-prefix=OUT

func.func private @printMemrefF32(memref<*xf32>) attributes {llvm.emit_c_interface}
func.func private @printMemrefI32(memref<*xi32>) attributes {llvm.emit_c_interface}

func.func @printF32(%t: tensor<4xf32>) {
  %m = bufferization.to_buffer %t read_only : tensor<4xf32> to memref<4xf32>
  %u = memref.cast %m : memref<4xf32> to memref<*xf32>
  call @printMemrefF32(%u) : (memref<*xf32>) -> ()
  return
}
func.func @printI32(%t: tensor<4xi32>) {
  %m = bufferization.to_buffer %t read_only : tensor<4xi32> to memref<4xi32>
  %u = memref.cast %m : memref<4xi32> to memref<*xi32>
  call @printMemrefI32(%u) : (memref<*xi32>) -> ()
  return
}

// CHECK-LABEL: func.func @main
// CHECK-NOT: hlo.
func.func @main() {
  // CHECK: arith.constant dense<[1.000000e+00, -2.000000e+00, 5.000000e-01, 4.000000e+00]>
  %a = hlo.constant {value = dense<[1.0, -2.0, 0.5, 4.0]> : tensor<4xf32>} : tensor<4xf32>
  %b = hlo.constant {value = dense<[2.0, 3.0, -1.0, 0.25]> : tensor<4xf32>} : tensor<4xf32>
  %p = hlo.constant {value = dense<[1.0, 4.0, 0.25, 2.0]> : tensor<4xf32>} : tensor<4xf32>

  // CHECK: linalg.generic
  // CHECK: arith.addf
  // OUT: [3,  1,  -0.5,  4.25]
  %add = hlo.add %a, %b : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  call @printF32(%add) : (tensor<4xf32>) -> ()
  // CHECK: arith.subf
  // OUT: [-1,  -5,  1.5,  3.75]
  %sub = hlo.subtract %a, %b : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  call @printF32(%sub) : (tensor<4xf32>) -> ()
  // CHECK: arith.mulf
  // OUT: [2,  -6,  -0.5,  1]
  %mul = hlo.multiply %a, %b : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  call @printF32(%mul) : (tensor<4xf32>) -> ()
  // CHECK: arith.divf
  // OUT: [0.5,  -0.666667,  -0.5,  16]
  %div = hlo.divide %a, %b : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  call @printF32(%div) : (tensor<4xf32>) -> ()
  // CHECK: arith.maximumf
  // OUT: [2,  3,  0.5,  4]
  %max = hlo.maximum %a, %b : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  call @printF32(%max) : (tensor<4xf32>) -> ()
  // CHECK: arith.minimumf
  // OUT: [1,  -2,  -1,  0.25]
  %min = hlo.minimum %a, %b : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  call @printF32(%min) : (tensor<4xf32>) -> ()
  // CHECK: math.powf
  // OUT: [1,  -8,  2,  1.41421]
  %pow = hlo.power %a, %b : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  call @printF32(%pow) : (tensor<4xf32>) -> ()

  // CHECK: math.exp
  // OUT: [2.71828,  0.135335,  1.64872,  54.5981]
  %exp = hlo.exp %a : (tensor<4xf32>) -> tensor<4xf32>
  call @printF32(%exp) : (tensor<4xf32>) -> ()
  // CHECK: math.log
  // OUT: [0,  1.38629,  -1.38629,  0.693147]
  %log = hlo.log %p : (tensor<4xf32>) -> tensor<4xf32>
  call @printF32(%log) : (tensor<4xf32>) -> ()
  // CHECK: math.rsqrt
  // OUT: [1,  0.5,  2,  0.707107]
  %rsqrt = hlo.rsqrt %p : (tensor<4xf32>) -> tensor<4xf32>
  call @printF32(%rsqrt) : (tensor<4xf32>) -> ()
  // CHECK: math.sqrt
  // OUT: [1,  2,  0.5,  1.41421]
  %sqrt = hlo.sqrt %p : (tensor<4xf32>) -> tensor<4xf32>
  call @printF32(%sqrt) : (tensor<4xf32>) -> ()
  // CHECK: arith.negf
  // OUT: [-1,  2,  -0.5,  -4]
  %neg = hlo.negate %a : (tensor<4xf32>) -> tensor<4xf32>
  call @printF32(%neg) : (tensor<4xf32>) -> ()
  // CHECK: math.cos
  // OUT: [0.540302,  -0.416147,  0.877583,  -0.653644]
  %cos = hlo.cosine %a : (tensor<4xf32>) -> tensor<4xf32>
  call @printF32(%cos) : (tensor<4xf32>) -> ()
  // CHECK: math.sin
  // OUT: [0.841471,  -0.909297,  0.479426,  -0.756802]
  %sin = hlo.sine %a : (tensor<4xf32>) -> tensor<4xf32>
  call @printF32(%sin) : (tensor<4xf32>) -> ()
  // XLA's sign keeps a zero's sign.
  // CHECK: math.copysign
  // OUT: [-1,  0,  1,  -0]
  %s = hlo.constant {value = dense<[-3.0, 0.0, 2.0, -0.0]> : tensor<4xf32>} : tensor<4xf32>
  %sign = hlo.sign %s : (tensor<4xf32>) -> tensor<4xf32>
  call @printF32(%sign) : (tensor<4xf32>) -> ()

  // Float to integer truncates toward zero; integer to float; a negate and
  // a signed divide on integers.
  // CHECK: arith.fptosi
  // OUT: [1,  -2,  3,  0]
  %f = hlo.constant {value = dense<[1.7, -2.7, 3.0, 0.0]> : tensor<4xf32>} : tensor<4xf32>
  %fi = hlo.convert %f : (tensor<4xf32>) -> tensor<4xi32>
  call @printI32(%fi) : (tensor<4xi32>) -> ()
  // CHECK: arith.sitofp
  // OUT: [-1,  2,  -3,  0]
  %nfi = hlo.negate %fi : (tensor<4xi32>) -> tensor<4xi32>
  %nff = hlo.convert %nfi : (tensor<4xi32>) -> tensor<4xf32>
  call @printF32(%nff) : (tensor<4xf32>) -> ()
  // CHECK: arith.divsi
  // OUT: [3,  -3,  -3,  3]
  %n = hlo.constant {value = dense<[7, -7, 7, -7]> : tensor<4xi32>} : tensor<4xi32>
  %d = hlo.constant {value = dense<[2, 2, -2, -2]> : tensor<4xi32>} : tensor<4xi32>
  %q = hlo.divide %n, %d : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi32>
  call @printI32(%q) : (tensor<4xi32>) -> ()

  // compare (ordered), and, select; a predicate converts to 0/1.
  // CHECK: arith.cmpf olt
  // CHECK: arith.andi
  // CHECK: arith.select
  // OUT: [1,  -2,  -1,  0.25]
  // OUT: [1,  1,  0,  0]
  // OUT: [0,  1,  0,  0]
  %lt = hlo.compare %a, %b {comparison_direction = #hlo<comparison_direction LT>} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
  %ne = hlo.compare %a, %p {comparison_direction = #hlo<comparison_direction NE>} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
  %both = hlo.and %lt, %ne : (tensor<4xi1>, tensor<4xi1>) -> tensor<4xi1>
  %sel = hlo.select %lt, %a, %b : (tensor<4xi1>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  call @printF32(%sel) : (tensor<4xf32>) -> ()
  %lti = hlo.convert %lt : (tensor<4xi1>) -> tensor<4xi32>
  call @printI32(%lti) : (tensor<4xi32>) -> ()
  %bothi = hlo.convert %both : (tensor<4xi1>) -> tensor<4xi32>
  call @printI32(%bothi) : (tensor<4xi32>) -> ()

  // ui32 becomes i32 with its unsigned meaning kept: 4294967295 > 1, and it
  // converts to float as 2^32 - 1.
  // CHECK: arith.cmpi ugt
  // CHECK: arith.uitofp
  // OUT: [0,  1,  0,  1]
  // OUT: [1,  4.29497e+09,  0,  3]
  %u = hlo.constant {value = dense<[1, 4294967295, 0, 3]> : tensor<4xui32>} : tensor<4xui32>
  %v = hlo.constant {value = dense<[2, 1, 0, 2]> : tensor<4xui32>} : tensor<4xui32>
  %gt = hlo.compare %u, %v {comparison_direction = #hlo<comparison_direction GT>} : (tensor<4xui32>, tensor<4xui32>) -> tensor<4xi1>
  %gti = hlo.convert %gt : (tensor<4xi1>) -> tensor<4xi32>
  call @printI32(%gti) : (tensor<4xi32>) -> ()
  %uf = hlo.convert %u : (tensor<4xui32>) -> tensor<4xf32>
  call @printF32(%uf) : (tensor<4xf32>) -> ()

  // iota along a dimension, as integers and as floats.
  // CHECK: linalg.index 1
  // OUT: [0,  1,  0,  1]
  // OUT: [0,  0,  1,  1]
  %i = hlo.iota {iota_dimension = 1 : i64} : tensor<2x2xi32>
  %ir = hlo.reshape %i : (tensor<2x2xi32>) -> tensor<4xi32>
  call @printI32(%ir) : (tensor<4xi32>) -> ()
  %j = hlo.iota {iota_dimension = 0 : i64} : tensor<2x2xf32>
  %jr = hlo.reshape %j : (tensor<2x2xf32>) -> tensor<4xf32>
  call @printF32(%jr) : (tensor<4xf32>) -> ()
  return
}
