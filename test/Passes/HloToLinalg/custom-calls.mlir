// kiln-convert-hlo-to-linalg, custom calls: each becomes a call of the
// host's kiln_custom_call with its site (walk order) and a table of the
// operands' and then the results' buffer pointers; the results are buffers
// allocated here. The lowering to LLVM calls the C interface the host
// provides (lib/Driver/CompiledStep.cpp binds each site to its kernel).
// RUN: kiln-opt %s --kiln-convert-hlo-to-linalg | FileCheck %s
// RUN: kiln-opt %s --kiln-hlo-to-llvm | FileCheck %s --check-prefix=LLVM

// CHECK: func.func private @kiln_custom_call(i64, memref<?xi64>) attributes {llvm.emit_c_interface}
// CHECK-LABEL: func.func @kernels
func.func @kernels(%x: tensor<2x4xf32>, %w: tensor<4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>, tensor<2xf32>) {
  // CHECK: %[[SITE0:.*]] = arith.constant 0 : i64
  // CHECK: %[[XB:.*]] = bufferization.to_buffer %{{.*}} read_only : tensor<2x4xf32> to memref<2x4xf32>
  // CHECK: memref.extract_aligned_pointer_as_index %[[XB]]
  // CHECK: bufferization.to_buffer %{{.*}} read_only : tensor<4xf32> to memref<4xf32>
  // CHECK: %[[OUT:.*]] = memref.alloc() : memref<2x4xf32>
  // CHECK: %[[TABLE:.*]] = memref.alloca() : memref<3xi64>
  // CHECK-COUNT-3: memref.store
  // CHECK: %[[DYN:.*]] = memref.cast %[[TABLE]] : memref<3xi64> to memref<?xi64>
  // CHECK: call @kiln_custom_call(%[[SITE0]], %[[DYN]]) : (i64, memref<?xi64>) -> ()
  // CHECK: bufferization.to_tensor %[[OUT]] restrict writable : memref<2x4xf32> to tensor<2x4xf32>
  %y = hlo.custom_call %x, %w {call_target_name = "AwsNeuronCustomNativeKernel", backend_config = "{\22kiln_kernel\22: \22nki_rms_norm\22}"} : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32> loc("layers.0.attention_norm")
  // Two results (a tuple in XLA): two buffers after the operand's.
  // CHECK: arith.constant 1 : i64
  // CHECK: memref.alloca() : memref<3xi64>
  // CHECK: call @kiln_custom_call
  %a:2 = hlo.custom_call %y {call_target_name = "AwsNeuronCustomNativeKernel", backend_config = "{}"} : (tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<2xf32>)
  return %y, %a#0, %a#1 : tensor<2x4xf32>, tensor<2x4xf32>, tensor<2xf32>
}

// LLVM: llvm.call @_mlir_ciface_kiln_custom_call(%{{.*}}, %{{.*}}) : (i64, !llvm.ptr) -> ()
// LLVM: llvm.func @_mlir_ciface_kiln_custom_call(i64, !llvm.ptr)
// LLVM: llvm.func @kernels
// LLVM: llvm.call @kiln_custom_call
