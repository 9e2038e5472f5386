func.func @add_integer(%a: tensor<4xi64>, %b: tensor<4xi64>) {
  %0 = kiln.add %a, %b {fqn = "layers.0.ffn_residual"} : (tensor<4xi64>, tensor<4xi64>) -> tensor<4xi64>
  return
}
