func.func @attention_kv_mismatch(%q: tensor<1x8x4x16xf32>, %k: tensor<1x8x2x16xf32>, %v: tensor<1x8x1x16xf32>) {
  %0:2 = kiln.attention %q, %k, %v {causal, scale = 0.25 : f32, fqn = "layers.0.attention.inner_attention"} : (tensor<1x8x4x16xf32>, tensor<1x8x2x16xf32>, tensor<1x8x1x16xf32>) -> (tensor<1x8x4x16xf32>, tensor<1x4x8xf32>)
  return
}
