func.func @linear_wrong_result(%x: tensor<2x32xf32>, %w: tensor<64x32xf32>) {
  %0 = kiln.linear %x, %w {fqn = "output"} : (tensor<2x32xf32>, tensor<64x32xf32>) -> tensor<2x32xf32>
  return
}
