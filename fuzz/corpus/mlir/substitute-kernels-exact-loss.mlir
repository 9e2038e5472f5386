func.func @loss(%q: tensor<1x128x4x8xf32> {kiln.input = "q"},
                %k: tensor<1x128x2x8xf32> {kiln.input = "k"},
                %v: tensor<1x128x2x8xf32> {kiln.input = "v"})
    -> (tensor<1x128x4x8xf32>, tensor<1x4x128xf32>) {
  %o, %lse = kiln.attention %q, %k, %v {scale = 0.35 : f32, fqn = "layers.0.attention.inner_attention"}
      : (tensor<1x128x4x8xf32>, tensor<1x128x2x8xf32>, tensor<1x128x2x8xf32>)
      -> (tensor<1x128x4x8xf32>, tensor<1x4x128xf32>)
  return %o, %lse : tensor<1x128x4x8xf32>, tensor<1x4x128xf32>
}
