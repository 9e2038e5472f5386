// kiln-outline-loops{parallel-work=N}: a top-level scf.parallel of at least
// N innermost iterations runs on the host's threads. Its function is public
// (the JIT gives it a packed wrapper) and takes the bounds of its outermost
// dimension last; the nest becomes a call of kiln_parallel_for with its
// site, those bounds and a table of its arguments' LLVM words (a memref's
// descriptor: aligned pointer twice, offset, sizes, strides; a scalar's
// bits). The module lists the functions by site. A smaller nest, or one
// that calls a function, is outlined as before.
// RUN: kiln-opt %s --kiln-outline-loops="parallel-work=32" | FileCheck %s
// RUN: kiln-opt %s --kiln-outline-loops | FileCheck %s --check-prefix=NONE

// CHECK: module attributes {kiln.parallel_loops = [@step_loop0]}
// CHECK: func.func private @kiln_parallel_for(i64, i64, i64, memref<?xi64>) attributes {llvm.emit_c_interface}
// CHECK: func.func @step_loop0(%[[X:.*]]: memref<8x4xf32>, %[[S:.*]]: f32, %[[Y:.*]]: memref<8x4xf32>, %[[LO:.*]]: index, %[[HI:.*]]: index) attributes {passthrough = ["noinline"]}
// CHECK: scf.parallel (%{{.*}}, %{{.*}}) = (%[[LO]], %{{.*}}) to (%[[HI]], %{{.*}})
// CHECK: func.func private @step_loop1(
// CHECK: func.func private @step_loop2(
// CHECK-LABEL: func.func @step(
// CHECK: %[[TABLE:.*]] = memref.alloca() : memref<15xi64>
// CHECK: %[[DYN:.*]] = memref.cast %[[TABLE]] : memref<15xi64> to memref<?xi64>
// CHECK: %[[SITE:.*]] = arith.constant 0 : i64
// CHECK: call @kiln_parallel_for(%[[SITE]], %{{.*}}, %{{.*}}, %[[DYN]]) : (i64, i64, i64, memref<?xi64>) -> ()
// CHECK: call @step_loop1(
// CHECK: call @step_loop2(
// NONE-NOT: kiln_parallel_for
// NONE-NOT: kiln.parallel_loops
func.func private @helper(f32) -> f32
func.func @step(%x: memref<8x4xf32>, %y: memref<8x4xf32>, %small: memref<4xf32>, %s: f32) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c8 = arith.constant 8 : index
  // 32 iterations: threaded.
  scf.parallel (%i, %j) = (%c0, %c0) to (%c8, %c4) step (%c1, %c1) {
    %v = memref.load %x[%i, %j] : memref<8x4xf32>
    %w = arith.mulf %v, %s : f32
    memref.store %w, %y[%i, %j] : memref<8x4xf32>
  }
  // 4 iterations: below the threshold.
  scf.parallel (%i) = (%c0) to (%c4) step (%c1) {
    %v = memref.load %small[%i] : memref<4xf32>
    %w = arith.addf %v, %s : f32
    memref.store %w, %small[%i] : memref<4xf32>
  }
  // A call: the workers run no calls.
  scf.parallel (%i, %j) = (%c0, %c0) to (%c8, %c4) step (%c1, %c1) {
    %v = memref.load %x[%i, %j] : memref<8x4xf32>
    %w = func.call @helper(%v) : (f32) -> f32
    memref.store %w, %y[%i, %j] : memref<8x4xf32>
  }
  return
}
