// kiln-outline-loops: each top-level scf.for of a function (the loop nests
// of a lowered step) becomes a private function marked noinline, called in
// its place; values from above are its arguments, constants and globals
// are cloned into it. A loop with results stays.
// RUN: kiln-opt %s --kiln-outline-loops | FileCheck %s
// The outlined step still runs and gives the same values.
// RUN: kiln-opt %s --kiln-outline-loops --convert-scf-to-cf --finalize-memref-to-llvm \
// RUN:   --convert-arith-to-llvm --convert-cf-to-llvm --convert-func-to-llvm \
// RUN:   --reconcile-unrealized-casts | mlir-runner -e main -entry-point-result=void \
// RUN:   -shared-libs=%mlir_runner_utils | FileCheck %s --check-prefix=OUT

memref.global "private" constant @three : memref<f32> = dense<3.0>
func.func private @printMemrefF32(memref<*xf32>) attributes {llvm.emit_c_interface}

// The loops' functions come first; the bounds, the step and the global are
// cloned into them.
// CHECK: func.func private @step_loop0(%{{.*}}: memref<4xf32>, %{{.*}}: f32, %{{.*}}: memref<4xf32>) attributes {passthrough = ["noinline"]}
// CHECK: arith.constant 0 : index
// CHECK: scf.for
// CHECK: func.func private @step_loop1(%{{.*}}: memref<4xf32>) attributes {passthrough = ["noinline"]}
// CHECK: memref.get_global @three
// CHECK-LABEL: func.func @step(
// CHECK-SAME: %[[X:.*]]: memref<4xf32>, %[[Y:.*]]: memref<4xf32>, %[[S:.*]]: f32)
// CHECK: call @step_loop0(%[[X]], %[[S]], %[[Y]]) : (memref<4xf32>, f32, memref<4xf32>) -> ()
// CHECK: call @step_loop1(%[[Y]]) : (memref<4xf32>) -> ()
// CHECK: scf.for {{.*}} iter_args
// CHECK: return
func.func @step(%x: memref<4xf32>, %y: memref<4xf32>, %s: f32) -> f32 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %zero = arith.constant 0.0 : f32
  scf.for %i = %c0 to %c4 step %c1 {
    %v = memref.load %x[%i] : memref<4xf32>
    %w = arith.mulf %v, %s : f32
    memref.store %w, %y[%i] : memref<4xf32>
  }
  %g = memref.get_global @three : memref<f32>
  scf.for %i = %c0 to %c4 step %c1 {
    %v = memref.load %y[%i] : memref<4xf32>
    %t = memref.load %g[] : memref<f32>
    %w = arith.addf %v, %t : f32
    memref.store %w, %y[%i] : memref<4xf32>
  }
  %sum = scf.for %i = %c0 to %c4 step %c1 iter_args(%acc = %zero) -> f32 {
    %v = memref.load %y[%i] : memref<4xf32>
    %a = arith.addf %acc, %v : f32
    scf.yield %a : f32
  }
  return %sum : f32
}
// y = 2 x + 3 for x = [1, 2, 3, 4]: [5, 7, 9, 11], summed 32.
// OUT: [5, 7, 9, 11]
// OUT: [32]
func.func @main() {
  %x = memref.alloc() : memref<4xf32>
  %y = memref.alloc() : memref<4xf32>
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %one = arith.constant 1.0 : f32
  %two = arith.constant 2.0 : f32
  %three = arith.constant 3.0 : f32
  %four = arith.constant 4.0 : f32
  memref.store %one, %x[%c0] : memref<4xf32>
  memref.store %two, %x[%c1] : memref<4xf32>
  memref.store %three, %x[%c2] : memref<4xf32>
  memref.store %four, %x[%c3] : memref<4xf32>
  %sum = call @step(%x, %y, %two) : (memref<4xf32>, memref<4xf32>, f32) -> f32
  %py = memref.cast %y : memref<4xf32> to memref<*xf32>
  call @printMemrefF32(%py) : (memref<*xf32>) -> ()
  %s = memref.alloc() : memref<1xf32>
  memref.store %sum, %s[%c0] : memref<1xf32>
  %ps = memref.cast %s : memref<1xf32> to memref<*xf32>
  call @printMemrefF32(%ps) : (memref<*xf32>) -> ()
  memref.dealloc %x : memref<4xf32>
  memref.dealloc %y : memref<4xf32>
  memref.dealloc %s : memref<1xf32>
  return
}
