func.func @load_balancing_loss_backward_num_experts(%g: tensor<f32>, %ids: tensor<2x8x2xi64>) {
  %0 = kiln.load_balancing_loss_backward %g, %ids {num_experts = 1 : i64, fqn = "aux_loss"} : (tensor<f32>, tensor<2x8x2xi64>) -> tensor<2x8x1xf32>
  return
}
