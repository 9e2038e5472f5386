func.func @loss(%ids: tensor<4x3xi64> {kiln.input = "input_ids"},
                %labels: tensor<4x3xi64> {kiln.input = "labels"},
                %table: tensor<16x8xf32> {kiln.param = "model.embed_tokens.weight"},
                %w: tensor<8x8xf32> {kiln.param = "model.layers.0.mlp.down_proj.weight"},
                %norm: tensor<8xf32> {kiln.param = "model.norm.weight"}) -> tensor<f32> {
  %h = kiln.embedding %table, %ids {fqn = "tok_embeddings"} : (tensor<16x8xf32>, tensor<4x3xi64>) -> tensor<4x3x8xf32>
  %d = kiln.linear %h, %w {fqn = "layers.0.feed_forward.w2"} : (tensor<4x3x8xf32>, tensor<8x8xf32>) -> tensor<4x3x8xf32>
  %r = kiln.add %h, %d {fqn = "layers.0.ffn_residual"} : (tensor<4x3x8xf32>, tensor<4x3x8xf32>) -> tensor<4x3x8xf32>
  %n = kiln.rms_norm %r, %norm {eps = 1.0e-6 : f32, fqn = "norm"} : (tensor<4x3x8xf32>, tensor<8xf32>) -> tensor<4x3x8xf32>
  %logits = kiln.linear %n, %table {fqn = "output"} : (tensor<4x3x8xf32>, tensor<16x8xf32>) -> tensor<4x3x16xf32>
  %loss = kiln.cross_entropy %logits, %labels {fqn = "loss"} : (tensor<4x3x16xf32>, tensor<4x3xi64>) -> tensor<f32>
  return %loss : tensor<f32>
}
