func.func @moe(%x: tensor<2x8x32xf32>, %logits: tensor<2x8x4xf32>, %logits1: tensor<2x8x4xf32>,
               %w1: tensor<4x12x32xf32>, %w3: tensor<4x12x32xf32>, %w2: tensor<4x32x12xf32>)
    -> (tensor<2x8x32xf32>, tensor<f32>) {
  %w, %ids, %p = kiln.router %logits {norm_topk_prob, top_k = 2 : i64, fqn = "layers.0.moe.router"} : (tensor<2x8x4xf32>) -> (tensor<2x8x2xf32>, tensor<2x8x2xi64>, tensor<2x8x4xf32>)
  %w1r, %ids1, %p1 = kiln.router %logits1 {top_k = 2 : i64, fqn = "layers.1.moe.router"} : (tensor<2x8x4xf32>) -> (tensor<2x8x2xf32>, tensor<2x8x2xi64>, tensor<2x8x4xf32>)
  %y = kiln.grouped_experts %x, %w, %ids, %w1, %w3, %w2 {fqn = "layers.0.moe.experts"} : (tensor<2x8x32xf32>, tensor<2x8x2xf32>, tensor<2x8x2xi64>, tensor<4x12x32xf32>, tensor<4x12x32xf32>, tensor<4x32x12xf32>) -> tensor<2x8x32xf32>
  %aux = kiln.load_balancing_loss %p, %p1, %ids, %ids1 {fqn = "aux_loss"} : (tensor<2x8x4xf32>, tensor<2x8x4xf32>, tensor<2x8x2xi64>, tensor<2x8x2xi64>) -> tensor<f32>
  %s = kiln.scale %aux {factor = 1.0e-3 : f64, fqn = "aux_loss.scaled"} : (tensor<f32>) -> tensor<f32>
  return %y, %s : tensor<2x8x32xf32>, tensor<f32>
}
