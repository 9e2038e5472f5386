func.func @kernel_wrong_result(%x: tensor<4x8xf32>, %w: tensor<8xf32>) {
  %y = kiln.kernel "nki_rms_norm"(%x, %w) {rule = "r", target = "kiln.rms_norm", options = {eps = 1.0e-6 : f32}, fqn = "norm"}
      : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x9xf32>
  return
}
