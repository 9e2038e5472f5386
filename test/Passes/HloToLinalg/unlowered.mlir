// An hlo op compiled mode does not lower (integer power) is an error naming
// the op and what it lowers instead; nothing crashes. (Every other hlo op
// lowers: an op added to the dialect without a lowering is refused as
// "compiled mode cannot lower 'hlo.X' (from FQN): no lowering".)
// RUN: not kiln-opt %s --kiln-convert-hlo-to-linalg -split-input-file 2>&1 | FileCheck %s

// power lowers on floats only (math.powf); XLA's integer power is refused.
// CHECK: error: compiled mode lowers power on floats only
func.func @ipow(%x: tensor<4xi32>) -> tensor<4xi32> {
  %y = hlo.power %x, %x : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi32>
  return %y : tensor<4xi32>
}
