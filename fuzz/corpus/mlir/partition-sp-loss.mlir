func.func @loss(%ids: tensor<2x4xi64> {kiln.input = "input_ids"},
                %labels: tensor<2x4xi64> {kiln.input = "labels"},
                %table: tensor<16x8xf32> {kiln.param = "model.embed_tokens.weight"},
                %w1: tensor<12x8xf32> {kiln.param = "model.layers.0.mlp.gate_proj.weight"},
                %w2: tensor<8x12xf32> {kiln.param = "model.layers.0.mlp.down_proj.weight"}) -> tensor<f32> {
  %h = kiln.embedding %table, %ids {fqn = "tok_embeddings"} : (tensor<16x8xf32>, tensor<2x4xi64>) -> tensor<2x4x8xf32>
  %a = kiln.linear %h, %w1 {fqn = "layers.0.feed_forward.w1"} : (tensor<2x4x8xf32>, tensor<12x8xf32>) -> tensor<2x4x12xf32>
  %d = kiln.linear %a, %w2 {fqn = "layers.0.feed_forward.w2"} : (tensor<2x4x12xf32>, tensor<8x12xf32>) -> tensor<2x4x8xf32>
  %r = kiln.add %h, %d {fqn = "layers.0.ffn_residual"} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %logits = kiln.linear %r, %table {fqn = "output"} : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
  %loss = kiln.cross_entropy %logits, %labels {fqn = "loss"} : (tensor<2x4x16xf32>, tensor<2x4xi64>) -> tensor<f32>
  return %loss : tensor<f32>
}
