// An op of layers.0 after layers.1's: with layers.1 starting stage 1, the
// layers.0 op (stage 0) would use a value of a later stage
// (pipeline-split.mlir runs this).
func.func @loss(%ids: tensor<1x2xi64> {kiln.input = "input_ids"},
                %labels: tensor<1x2xi64> {kiln.input = "labels"},
                %table: tensor<8x4xf32> {kiln.param = "model.embed_tokens.weight"},
                %w0: tensor<4x4xf32> {kiln.param = "model.layers.0.mlp.down_proj.weight"},
                %w1: tensor<4x4xf32> {kiln.param = "model.layers.1.mlp.down_proj.weight"}) -> tensor<f32> {
  %h = kiln.embedding %table, %ids {fqn = "tok_embeddings"} : (tensor<8x4xf32>, tensor<1x2xi64>) -> tensor<1x2x4xf32>
  %d0 = kiln.linear %h, %w0 {fqn = "layers.0.feed_forward.w2"} : (tensor<1x2x4xf32>, tensor<4x4xf32>) -> tensor<1x2x4xf32>
  %d1 = kiln.linear %h, %w1 {fqn = "layers.1.feed_forward.w2"} : (tensor<1x2x4xf32>, tensor<4x4xf32>) -> tensor<1x2x4xf32>
  %r0 = kiln.add %d0, %d1 {fqn = "layers.0.ffn_residual"} : (tensor<1x2x4xf32>, tensor<1x2x4xf32>) -> tensor<1x2x4xf32>
  %logits = kiln.linear %r0, %table {fqn = "output"} : (tensor<1x2x4xf32>, tensor<8x4xf32>) -> tensor<1x2x8xf32>
  %loss = kiln.cross_entropy %logits, %labels {fqn = "loss"} : (tensor<1x2x8xf32>, tensor<1x2xi64>) -> tensor<f32>
  return %loss : tensor<f32>
}
