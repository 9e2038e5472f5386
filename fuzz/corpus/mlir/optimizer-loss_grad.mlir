func.func @loss_grad(%ids: tensor<1x2xi64> {kiln.input = "input_ids"},
                     %labels: tensor<1x2xi64> {kiln.input = "labels"},
                     %table: tensor<8x4xf32> {kiln.param = "model.embed_tokens.weight"},
                     %norm: tensor<4xf32> {kiln.param = "model.norm.weight"})
    -> (tensor<f32> {kiln.output = "loss"}, tensor<8x4xf32> {kiln.grad = "model.embed_tokens.weight"},
        tensor<4xf32> {kiln.grad = "model.norm.weight"}) {
  %h = kiln.embedding %table, %ids {fqn = "tok_embeddings"} : (tensor<8x4xf32>, tensor<1x2xi64>) -> tensor<1x2x4xf32>
  %n = kiln.rms_norm %h, %norm {eps = 1.0e-6 : f32, fqn = "norm"} : (tensor<1x2x4xf32>, tensor<4xf32>) -> tensor<1x2x4xf32>
  %logits = kiln.linear %n, %table {fqn = "output"} : (tensor<1x2x4xf32>, tensor<8x4xf32>) -> tensor<1x2x8xf32>
  %loss = kiln.cross_entropy %logits, %labels {fqn = "loss"} : (tensor<1x2x8xf32>, tensor<1x2xi64>) -> tensor<f32>
  %seed = kiln.constant {fqn = "loss.seed_grad", value = dense<1.0> : tensor<f32>} : tensor<f32>
  %dl = kiln.cross_entropy_backward %logits, %labels, %seed {fqn = "loss"} : (tensor<1x2x8xf32>, tensor<1x2xi64>, tensor<f32>) -> tensor<1x2x8xf32>
  %dn = kiln.linear_backward_data %dl, %table {fqn = "output"} : (tensor<1x2x8xf32>, tensor<8x4xf32>) -> tensor<1x2x4xf32>
  %dt1 = kiln.linear_backward_weight %dl, %n {fqn = "output"} : (tensor<1x2x8xf32>, tensor<1x2x4xf32>) -> tensor<8x4xf32>
  %dh, %dw = kiln.rms_norm_backward %dn, %h, %norm {eps = 1.0e-6 : f32, fqn = "norm"} : (tensor<1x2x4xf32>, tensor<1x2x4xf32>, tensor<4xf32>) -> (tensor<1x2x4xf32>, tensor<4xf32>)
  %dt2 = kiln.embedding_backward %dh, %ids {fqn = "tok_embeddings", vocab_size = 8 : i64} : (tensor<1x2x4xf32>, tensor<1x2xi64>) -> tensor<8x4xf32>
  %dt = kiln.add %dt1, %dt2 {fqn = "tok_embeddings.grad_accum"} : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<8x4xf32>
  return %loss, %dt, %dw : tensor<f32>, tensor<8x4xf32>, tensor<4xf32>
}
