func.func @rms_norm_weight(%x: tensor<2x8x32xf32>, %w: tensor<16xf32>) {
  %0 = kiln.rms_norm %x, %w {eps = 1.0e-6 : f32, fqn = "layers.2.ffn_norm"} : (tensor<2x8x32xf32>, tensor<16xf32>) -> tensor<2x8x32xf32>
  return
}
