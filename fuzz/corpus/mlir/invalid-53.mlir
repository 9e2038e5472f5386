func.func @load_balancing_loss_odd_operands(%p: tensor<2x8x4xf32>, %ids: tensor<2x8x2xi64>, %junk: tensor<7xi32>) {
  %0 = kiln.load_balancing_loss %p, %ids, %junk {fqn = "aux_loss"} : (tensor<2x8x4xf32>, tensor<2x8x2xi64>, tensor<7xi32>) -> tensor<f32>
  return
}
