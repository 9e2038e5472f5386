func.func @load_balancing_loss_expert_counts(%p0: tensor<2x8x4xf32>, %p1: tensor<2x8x8xf32>, %ids: tensor<2x8x2xi64>) {
  %0 = kiln.load_balancing_loss %p0, %p1, %ids, %ids {fqn = "aux_loss"} : (tensor<2x8x4xf32>, tensor<2x8x8xf32>, tensor<2x8x2xi64>, tensor<2x8x2xi64>) -> tensor<f32>
  return
}
