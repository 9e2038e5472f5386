func.func @kernel_bad_weight(%x: tensor<4x8xf32>, %w: tensor<9xf32>) {
  %y = kiln.kernel "nki_rms_norm"(%x, %w) {rule = "r", target = "kiln.rms_norm", options = {eps = 1.0e-6 : f32}, fqn = "norm"}
      : (tensor<4x8xf32>, tensor<9xf32>) -> tensor<4x8xf32>
  return
}
