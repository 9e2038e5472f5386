func.func @missing_fqn(%x: tensor<2x32xf32>, %w: tensor<64x32xf32>) {
  %0 = kiln.linear %x, %w : (tensor<2x32xf32>, tensor<64x32xf32>) -> tensor<2x64xf32>
  return
}
