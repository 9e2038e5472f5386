// An hlo op compiled mode does not lower (the collectives and the replica id,
// integer power) is an error naming the op and, by its location, the kiln
// fqn it came from; nothing crashes.
// RUN: not kiln-opt %s --kiln-convert-hlo-to-linalg -split-input-file 2>&1 | FileCheck %s

// CHECK: error: {{.*}}compiled mode cannot lower 'hlo.all_gather' (from regather): collectives and the replica id are not lowered yet
func.func @gather(%x: tensor<2x8xf32>) -> tensor<4x8xf32> {
  %y = hlo.all_gather %x {all_gather_dim = 0 : i64, replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>} : (tensor<2x8xf32>) -> tensor<4x8xf32> loc("regather")
  return %y : tensor<4x8xf32>
}

// -----

// CHECK: error: {{.*}}compiled mode cannot lower 'hlo.replica_id': collectives and the replica id are not lowered yet
func.func @replica() -> tensor<ui32> {
  %r = hlo.replica_id : tensor<ui32>
  return %r : tensor<ui32>
}

// -----

// power lowers on floats only (math.powf); XLA's integer power is refused.
// CHECK: error: compiled mode lowers power on floats only
func.func @ipow(%x: tensor<4xi32>) -> tensor<4xi32> {
  %y = hlo.power %x, %x : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi32>
  return %y : tensor<4xi32>
}
