func.func @linear_in_mismatch(%x: tensor<2x8x32xf32>, %w: tensor<64x16xf32>) {
  %0 = kiln.linear %x, %w {fqn = "layers.0.attention.wq"} : (tensor<2x8x32xf32>, tensor<64x16xf32>) -> tensor<2x8x64xf32>
  return
}
