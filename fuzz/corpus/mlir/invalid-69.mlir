func.func @transpose_not_a_permutation(%x: tensor<2x3x4xf32>) {
  %y = kiln.transpose %x {permutation = array<i64: 0, 0, 2>, fqn = "t"} : (tensor<2x3x4xf32>) -> tensor<2x2x4xf32>
  return
}
