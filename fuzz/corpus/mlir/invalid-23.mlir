func.func @reshape_count(%x: tensor<2x8x64xf32>) {
  %0 = kiln.reshape %x {shape = array<i64: 2, 8, 4, 15>, fqn = "layers.0.attention.q_heads"} : (tensor<2x8x64xf32>) -> tensor<2x8x4x15xf32>
  return
}
