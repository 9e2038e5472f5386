func.func @router_backward_weights_grad(%p: tensor<2x8x4xf32>, %ids: tensor<2x8x2xi64>, %dw: tensor<2x8x4xf32>) {
  %0 = kiln.router_backward %p, %ids, %dw, %p {fqn = "layers.0.moe.router"} : (tensor<2x8x4xf32>, tensor<2x8x2xi64>, tensor<2x8x4xf32>, tensor<2x8x4xf32>) -> tensor<2x8x4xf32>
  return
}
