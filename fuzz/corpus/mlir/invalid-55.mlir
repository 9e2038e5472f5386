func.func @load_balancing_loss_count(%p: tensor<2x8x4xf32>, %ids: tensor<2x8x2xi64>) {
  %0 = kiln.load_balancing_loss %p, %p, %ids {fqn = "aux_loss"} : (tensor<2x8x4xf32>, tensor<2x8x4xf32>, tensor<2x8x2xi64>) -> tensor<f32>
  return
}
