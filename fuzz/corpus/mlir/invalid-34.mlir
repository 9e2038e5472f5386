func.func @param_empty(%a: tensor<4xf32> {kiln.param = ""}) {
  return
}
