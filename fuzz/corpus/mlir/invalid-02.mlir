func.func @linear_mixed_dtypes(%x: tensor<2x32xf32>, %w: tensor<64x32xbf16>) {
  %0 = kiln.linear %x, %w {fqn = "layers.1.feed_forward.w1"} : (tensor<2x32xf32>, tensor<64x32xbf16>) -> tensor<2x64xf32>
  return
}
