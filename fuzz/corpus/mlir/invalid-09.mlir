func.func @rms_norm_eps(%x: tensor<2x8x32xf32>, %w: tensor<32xf32>) {
  %0 = kiln.rms_norm %x, %w {eps = 0.0 : f32, fqn = "norm"} : (tensor<2x8x32xf32>, tensor<32xf32>) -> tensor<2x8x32xf32>
  return
}
