func.func @grad_on_argument(%a: tensor<4xf32> {kiln.grad = "w"}) {
  return
}
