func.func @rope_odd_head_dim(%q: tensor<1x8x4x15xf32>, %k: tensor<1x8x2x15xf32>, %c: tensor<8x30xf32>) {
  %0:2 = kiln.rope %q, %k, %c {fqn = "layers.0.attention.rope"} : (tensor<1x8x4x15xf32>, tensor<1x8x2x15xf32>, tensor<8x30xf32>) -> (tensor<1x8x4x15xf32>, tensor<1x8x2x15xf32>)
  return
}
