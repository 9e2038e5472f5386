func.func @kernel_missing_option(%x: tensor<4x8xf32>, %w: tensor<8xf32>) {
  %y = kiln.kernel "nki_rms_norm"(%x, %w) {rule = "r", target = "kiln.rms_norm", options = {}, fqn = "norm"}
      : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  return
}
