// An hlo op compiled mode does not lower yet is an error naming the op and,
// by its location, the kiln fqn it came from; nothing crashes.
// RUN: not kiln-opt %s --kiln-convert-hlo-to-linalg -split-input-file 2>&1 | FileCheck %s

// CHECK: error: {{.*}}compiled mode cannot lower 'hlo.custom_call' (from model.layers.0.attention): custom calls (NKI kernels) are not lowered yet
func.func @kernel(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = hlo.custom_call %x {call_target_name = "AwsNeuronCustomNativeKernel", backend_config = "{}"} : (tensor<4xf32>) -> tensor<4xf32> loc("model.layers.0.attention")
  return %y : tensor<4xf32>
}

// -----

// CHECK: error: {{.*}}compiled mode cannot lower 'hlo.all_gather' (from regather): collectives and the replica id are not lowered yet
func.func @gather(%x: tensor<2x8xf32>) -> tensor<4x8xf32> {
  %y = hlo.all_gather %x {all_gather_dim = 0 : i64, replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>} : (tensor<2x8xf32>) -> tensor<4x8xf32> loc("regather")
  return %y : tensor<4x8xf32>
}
