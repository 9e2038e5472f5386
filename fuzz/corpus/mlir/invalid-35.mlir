func.func @param_not_string(%a: tensor<4xf32> {kiln.param = 3}) {
  return
}
