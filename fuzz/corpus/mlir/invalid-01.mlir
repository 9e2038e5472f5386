func.func @linear_weight_rank(%x: tensor<2x8x32xf32>, %w: tensor<64x32x1xf32>) {
  %0 = kiln.linear %x, %w {fqn = "output"} : (tensor<2x8x32xf32>, tensor<64x32x1xf32>) -> tensor<2x8x64xf32>
  return
}
