func.func @load_balancing_loss_k(%p: tensor<2x8x4xf32>, %ids: tensor<2x8x5xi64>) {
  %0 = kiln.load_balancing_loss %p, %ids {fqn = "aux_loss"} : (tensor<2x8x4xf32>, tensor<2x8x5xi64>) -> tensor<f32>
  return
}
