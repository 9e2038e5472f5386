func.func @moe_backward(%dy: tensor<2x8x32xf32>, %x: tensor<2x8x32xf32>, %w: tensor<2x8x2xf32>,
                        %ids: tensor<2x8x2xi64>, %ids1: tensor<2x8x2xi32>, %p: tensor<2x8x4xf32>,
                        %w1: tensor<4x12x32xf32>, %w3: tensor<4x12x32xf32>, %w2: tensor<4x32x12xf32>,
                        %g: tensor<f32>)
    -> (tensor<2x8x4xf32>, tensor<4x32x12xf32>, tensor<2x8x4xf32>) {
  %dlogits = kiln.router_backward %p, %ids, %w, %p {norm_topk_prob, fqn = "layers.0.moe.router"} : (tensor<2x8x4xf32>, tensor<2x8x2xi64>, tensor<2x8x2xf32>, tensor<2x8x4xf32>) -> tensor<2x8x4xf32>
  %dx, %dw, %dw1, %dw3, %dw2 = kiln.grouped_experts_backward %dy, %x, %w, %ids, %w1, %w3, %w2 {fqn = "layers.0.moe.experts"} : (tensor<2x8x32xf32>, tensor<2x8x32xf32>, tensor<2x8x2xf32>, tensor<2x8x2xi64>, tensor<4x12x32xf32>, tensor<4x12x32xf32>, tensor<4x32x12xf32>) -> (tensor<2x8x32xf32>, tensor<2x8x2xf32>, tensor<4x12x32xf32>, tensor<4x12x32xf32>, tensor<4x32x12xf32>)
  %dp0, %dp1 = kiln.load_balancing_loss_backward %g, %ids, %ids1 {num_experts = 4 : i64, fqn = "aux_loss"} : (tensor<f32>, tensor<2x8x2xi64>, tensor<2x8x2xi32>) -> (tensor<2x8x4xf32>, tensor<2x8x4xf32>)
  return %dlogits, %dw2, %dp1 : tensor<2x8x4xf32>, tensor<4x32x12xf32>, tensor<2x8x4xf32>
}
