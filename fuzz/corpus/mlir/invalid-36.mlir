func.func @two_roles(%a: tensor<4xf32> {kiln.param = "w", kiln.input = "input_ids"}) {
  return
}
