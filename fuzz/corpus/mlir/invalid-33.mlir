func.func @param_twice(%a: tensor<4xf32> {kiln.param = "model.norm.weight"},
                       %b: tensor<4xf32> {kiln.param = "model.norm.weight"}) {
  return
}
