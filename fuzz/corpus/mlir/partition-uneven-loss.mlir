func.func @loss(%ids: tensor<3x2xi64> {kiln.input = "input_ids"},
                %labels: tensor<3x2xi64> {kiln.input = "labels"},
                %table: tensor<16x8xf32> {kiln.param = "model.embed_tokens.weight"},
                %norm: tensor<8xf32> {kiln.param = "model.norm.weight"}) -> tensor<f32> {
  %h = kiln.embedding %table, %ids {fqn = "tok_embeddings"} : (tensor<16x8xf32>, tensor<3x2xi64>) -> tensor<3x2x8xf32>
  %n = kiln.rms_norm %h, %norm {eps = 1.0e-6 : f32, fqn = "norm"} : (tensor<3x2x8xf32>, tensor<8xf32>) -> tensor<3x2x8xf32>
  %logits = kiln.linear %n, %table {fqn = "output"} : (tensor<3x2x8xf32>, tensor<16x8xf32>) -> tensor<3x2x16xf32>
  %loss = kiln.cross_entropy %logits, %labels {fqn = "loss"} : (tensor<3x2x16xf32>, tensor<3x2xi64>) -> tensor<f32>
  return %loss : tensor<f32>
}
