func.func @swiglu_mismatch(%g: tensor<2x48xf32>, %u: tensor<2x32xf32>) {
  %0 = kiln.swiglu %g, %u {fqn = "layers.0.feed_forward.swiglu"} : (tensor<2x48xf32>, tensor<2x32xf32>) -> tensor<2x48xf32>
  return
}
