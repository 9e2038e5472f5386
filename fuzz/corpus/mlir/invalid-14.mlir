func.func @rope_k_seq(%q: tensor<1x8x4x16xf32>, %k: tensor<1x4x2x16xf32>, %c: tensor<8x32xf32>) {
  %0:2 = kiln.rope %q, %k, %c {fqn = "layers.0.attention.rope"} : (tensor<1x8x4x16xf32>, tensor<1x4x2x16xf32>, tensor<8x32xf32>) -> (tensor<1x8x4x16xf32>, tensor<1x4x2x16xf32>)
  return
}
