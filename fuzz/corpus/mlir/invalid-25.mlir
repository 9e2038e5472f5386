func.func @attention_backward_lse(%q: tensor<1x8x4x16xf32>, %k: tensor<1x8x2x16xf32>, %lse: tensor<1x8x4xf32>) {
  %0:3 = kiln.attention_backward %q, %q, %k, %k, %q, %lse {causal, scale = 0.25 : f32, fqn = "layers.0.attention.inner_attention"} : (tensor<1x8x4x16xf32>, tensor<1x8x4x16xf32>, tensor<1x8x2x16xf32>, tensor<1x8x2x16xf32>, tensor<1x8x4x16xf32>, tensor<1x8x4xf32>) -> (tensor<1x8x4x16xf32>, tensor<1x8x2x16xf32>, tensor<1x8x2x16xf32>)
  return
}
