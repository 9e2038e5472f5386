func.func @loss(%q: tensor<1x256x4x8xf32> {kiln.input = "q"},
                %k: tensor<1x256x2x8xf32> {kiln.input = "k"},
                %v: tensor<1x256x2x8xf32> {kiln.input = "v"},
                %labels: tensor<1x256xi64> {kiln.input = "labels"},
                %w: tensor<16x32xf32> {kiln.param = "lm_head.weight"}) -> tensor<f32> {
  %cache = kiln.rope_cache {theta = 1.0e6 : f64, seq_len = 256 : i64, head_dim = 8 : i64,
                            fqn = "rope_cache"} : tensor<256x16xf32>
  %qr, %kr = kiln.rope %q, %k, %cache {fqn = "layers.0.attention.rope"}
      : (tensor<1x256x4x8xf32>, tensor<1x256x2x8xf32>, tensor<256x16xf32>)
      -> (tensor<1x256x4x8xf32>, tensor<1x256x2x8xf32>)
  %o, %lse = kiln.attention %qr, %kr, %v {causal, scale = 0.35 : f32,
                                         fqn = "layers.0.attention.inner_attention"}
      : (tensor<1x256x4x8xf32>, tensor<1x256x2x8xf32>, tensor<1x256x2x8xf32>)
      -> (tensor<1x256x4x8xf32>, tensor<1x4x256xf32>)
  %m = kiln.reshape %o {shape = array<i64: 1, 256, 32>, fqn = "layers.0.attention.merge"}
      : (tensor<1x256x4x8xf32>) -> tensor<1x256x32xf32>
  %logits = kiln.linear %m, %w {fqn = "output"}
      : (tensor<1x256x32xf32>, tensor<16x32xf32>) -> tensor<1x256x16xf32>
  %loss = kiln.cross_entropy %logits, %labels {fqn = "loss"}
      : (tensor<1x256x16xf32>, tensor<1x256xi64>) -> tensor<f32>
  return %loss : tensor<f32>
}
