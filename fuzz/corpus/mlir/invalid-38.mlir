func.func @output_twice(%a: tensor<f32> {kiln.input = "x"}) -> (tensor<f32> {kiln.output = "loss"}, tensor<f32> {kiln.output = "loss"}) {
  return %a, %a : tensor<f32>, tensor<f32>
}
