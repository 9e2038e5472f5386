func.func @dynamic_shape(%x: tensor<?x32xf32>, %w: tensor<64x32xf32>) {
  %0 = kiln.linear %x, %w {fqn = "output"} : (tensor<?x32xf32>, tensor<64x32xf32>) -> tensor<?x64xf32>
  return
}
