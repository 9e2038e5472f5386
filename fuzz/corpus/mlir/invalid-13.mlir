func.func @rope_cache_shape(%q: tensor<1x8x4x16xf32>, %k: tensor<1x8x2x16xf32>, %c: tensor<8x16xf32>) {
  %0:2 = kiln.rope %q, %k, %c {fqn = "layers.11.attention.rope"} : (tensor<1x8x4x16xf32>, tensor<1x8x2x16xf32>, tensor<8x16xf32>) -> (tensor<1x8x4x16xf32>, tensor<1x8x2x16xf32>)
  return
}
