func.func @cross_entropy_labels(%l: tensor<2x8x64xf32>, %y: tensor<2x7xi64>) {
  %0 = kiln.cross_entropy %l, %y {fqn = "loss"} : (tensor<2x8x64xf32>, tensor<2x7xi64>) -> tensor<f32>
  return
}
