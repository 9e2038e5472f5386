func.func @empty_fqn(%x: tensor<2x8x32xf32>, %w: tensor<32xf32>) {
  %0 = kiln.rms_norm %x, %w {eps = 1.0e-6 : f32, fqn = ""} : (tensor<2x8x32xf32>, tensor<32xf32>) -> tensor<2x8x32xf32>
  return
}
