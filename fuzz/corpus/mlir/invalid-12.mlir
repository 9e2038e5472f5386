func.func @empty_fqn_elementwise(%x: tensor<4xf32>) {
  %0 = kiln.add %x, %x {fqn = ""} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return
}
