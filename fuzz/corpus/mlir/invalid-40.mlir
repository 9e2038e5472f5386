func.func @unknown_kiln_attribute(%x: tensor<2x4xf32>, %y: tensor<2x4xf32>) {
  %0 = kiln.add %x, %y {fqn = "h", kiln.savd = array<i64: 0>} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  return
}
