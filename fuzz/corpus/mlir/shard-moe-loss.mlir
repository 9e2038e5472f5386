func.func @loss(%ids: tensor<2x3xi64> {kiln.input = "input_ids"},
                %labels: tensor<2x3xi64> {kiln.input = "labels"},
                %table: tensor<16x8xf32> {kiln.param = "model.embed_tokens.weight"},
                %gate: tensor<4x8xf32> {kiln.param = "model.layers.0.mlp.gate.weight"},
                %w1: tensor<4x6x8xf32> {kiln.param = "model.layers.0.mlp.experts.*.gate_proj.weight"},
                %w3: tensor<4x6x8xf32> {kiln.param = "model.layers.0.mlp.experts.*.up_proj.weight"},
                %w2: tensor<4x8x6xf32> {kiln.param = "model.layers.0.mlp.experts.*.down_proj.weight"}) -> tensor<f32> {
  %h = kiln.embedding %table, %ids {fqn = "tok_embeddings"} : (tensor<16x8xf32>, tensor<2x3xi64>) -> tensor<2x3x8xf32>
  %rl = kiln.linear %h, %gate {fqn = "layers.0.moe.router.gate"} : (tensor<2x3x8xf32>, tensor<4x8xf32>) -> tensor<2x3x4xf32>
  %w, %e, %p = kiln.router %rl {norm_topk_prob, top_k = 2 : i64, fqn = "layers.0.moe.router"} : (tensor<2x3x4xf32>) -> (tensor<2x3x2xf32>, tensor<2x3x2xi64>, tensor<2x3x4xf32>)
  %y = kiln.grouped_experts %h, %w, %e, %w1, %w3, %w2 {fqn = "layers.0.moe.experts"} : (tensor<2x3x8xf32>, tensor<2x3x2xf32>, tensor<2x3x2xi64>, tensor<4x6x8xf32>, tensor<4x6x8xf32>, tensor<4x8x6xf32>) -> tensor<2x3x8xf32>
  %r = kiln.add %h, %y {fqn = "layers.0.ffn_residual"} : (tensor<2x3x8xf32>, tensor<2x3x8xf32>) -> tensor<2x3x8xf32>
  %logits = kiln.linear %r, %table {fqn = "output"} : (tensor<2x3x8xf32>, tensor<16x8xf32>) -> tensor<2x3x16xf32>
  %ce = kiln.cross_entropy %logits, %labels {fqn = "loss"} : (tensor<2x3x16xf32>, tensor<2x3xi64>) -> tensor<f32>
  %aux = kiln.load_balancing_loss %p, %e {fqn = "aux_loss"} : (tensor<2x3x4xf32>, tensor<2x3x2xi64>) -> tensor<f32>
  %s = kiln.scale %aux {factor = 1.0e-3 : f64, fqn = "aux_loss.scaled"} : (tensor<f32>) -> tensor<f32>
  %loss = kiln.add %ce, %s {fqn = "loss.with_aux"} : (tensor<f32>, tensor<f32>) -> tensor<f32>
  return %loss : tensor<f32>
}
