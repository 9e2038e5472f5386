func.func @saved_out_of_range(%x: tensor<2x4xf32>, %y: tensor<2x4xf32>) {
  %0 = kiln.add %x, %y {fqn = "h", kiln.saved = array<i64: -1>} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  return
}
