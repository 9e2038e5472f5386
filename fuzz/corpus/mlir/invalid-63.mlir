func.func @load_balancing_loss_backward_no_layers(%g: tensor<f32>) {
  kiln.load_balancing_loss_backward %g {num_experts = 4 : i64, fqn = "aux_loss"} : (tensor<f32>) -> ()
  return
}
