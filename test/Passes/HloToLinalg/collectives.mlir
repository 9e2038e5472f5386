// kiln-convert-hlo-to-linalg, collectives: each collective and the replica id
// becomes a call of the host's kiln_collective with its site (walk order
// over both) and a table of the operand's and then the result's buffer
// pointers; the result is a buffer allocated here. The host binds each site
// to its kind, dimension, reduction and group (lib/Backend/Compiled/
// HostCollectives.cpp) and runs it over MPI.
// RUN: kiln-opt %s --kiln-convert-hlo-to-linalg | FileCheck %s
// RUN: kiln-opt %s --kiln-hlo-to-llvm | FileCheck %s --check-prefix=LLVM

// CHECK: func.func private @kiln_collective(i64, memref<?xi64>) attributes {llvm.emit_c_interface}
// CHECK-LABEL: func.func @collectives
func.func @collectives(%x: tensor<2x8xf32>, %n: tensor<4xi32>) -> (tensor<4x8xf32>, tensor<1x8xf32>, tensor<4xi32>, tensor<2x8xf32>, tensor<i32>) {
  // CHECK: %[[SITE0:.*]] = arith.constant 0 : i64
  // CHECK: %[[XB:.*]] = bufferization.to_buffer %{{.*}} read_only : tensor<2x8xf32> to memref<2x8xf32>
  // CHECK: memref.extract_aligned_pointer_as_index %[[XB]]
  // CHECK: %[[OUT:.*]] = memref.alloc() : memref<4x8xf32>
  // CHECK: %[[TABLE:.*]] = memref.alloca() : memref<2xi64>
  // CHECK-COUNT-2: memref.store
  // CHECK: %[[DYN:.*]] = memref.cast %[[TABLE]] : memref<2xi64> to memref<?xi64>
  // CHECK: call @kiln_collective(%[[SITE0]], %[[DYN]]) : (i64, memref<?xi64>) -> ()
  // CHECK: bufferization.to_tensor %[[OUT]] restrict writable : memref<4x8xf32> to tensor<4x8xf32>
  %g = hlo.all_gather %x {all_gather_dim = 0 : i64, replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>} : (tensor<2x8xf32>) -> tensor<4x8xf32> loc("regather")
  // CHECK: arith.constant 1 : i64
  // CHECK: memref.alloc() : memref<1x8xf32>
  // CHECK: call @kiln_collective
  %s = hlo.reduce_scatter %x {scatter_dimension = 0 : i64, combiner = #hlo<combiner add>, replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>} : (tensor<2x8xf32>) -> tensor<1x8xf32>
  // CHECK: arith.constant 2 : i64
  // CHECK: bufferization.to_buffer %{{.*}} read_only : tensor<4xi32> to memref<4xi32>
  // CHECK: call @kiln_collective
  %r = hlo.all_reduce %n {combiner = #hlo<combiner max>, replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>} : (tensor<4xi32>) -> tensor<4xi32>
  // CHECK: arith.constant 3 : i64
  // CHECK: call @kiln_collective
  %a = hlo.all_to_all %x {split_dimension = 1 : i64, replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  // The replica id: no operand, a ui32 scalar (signless i32 once converted;
  // the function returns it as an s32, as signatures are not converted).
  // CHECK: %[[SITE4:.*]] = arith.constant 4 : i64
  // CHECK: %[[ID:.*]] = memref.alloc() : memref<i32>
  // CHECK: memref.alloca() : memref<1xi64>
  // CHECK: call @kiln_collective(%[[SITE4]]
  // CHECK: bufferization.to_tensor %[[ID]] restrict writable : memref<i32> to tensor<i32>
  %id = hlo.replica_id : tensor<ui32>
  %ids = hlo.convert %id : (tensor<ui32>) -> tensor<i32>
  return %g, %s, %r, %a, %ids : tensor<4x8xf32>, tensor<1x8xf32>, tensor<4xi32>, tensor<2x8xf32>, tensor<i32>
}

// LLVM: llvm.call @_mlir_ciface_kiln_collective(%{{.*}}, %{{.*}}) : (i64, !llvm.ptr) -> ()
// LLVM: llvm.func @_mlir_ciface_kiln_collective(i64, !llvm.ptr)
