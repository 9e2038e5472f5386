func.func @kernel_call(%q: tensor<1x256x2x8xf32>, %cache: tensor<256x16xf32>)
    -> (tensor<1x2x256x8xf32>, tensor<1x2x256x8xf32>) {
  %qt = kiln.transpose %q {permutation = array<i64: 0, 2, 1, 3>, fqn = "layers.0.attention.rope"}
      : (tensor<1x256x2x8xf32>) -> tensor<1x2x256x8xf32>
  %r:2 = kiln.kernel "nki_rope"(%qt, %qt, %cache)
      {rule = "rope", target = "kiln.rope", options = {}, fqn = "layers.0.attention.rope"}
      : (tensor<1x2x256x8xf32>, tensor<1x2x256x8xf32>, tensor<256x16xf32>)
      -> (tensor<1x2x256x8xf32>, tensor<1x2x256x8xf32>)
  %d:2 = kiln.kernel_backward "nki_rope"(%r#0, %r#1, %cache)
      {rule = "rope", target = "kiln.rope", options = {}, fqn = "layers.0.attention.rope"}
      : (tensor<1x2x256x8xf32>, tensor<1x2x256x8xf32>, tensor<256x16xf32>)
      -> (tensor<1x2x256x8xf32>, tensor<1x2x256x8xf32>)
  return %d#0, %d#1 : tensor<1x2x256x8xf32>, tensor<1x2x256x8xf32>
}
