module {
  func.func @loss(%x: tensor<4xf32> {kiln.param = "w"}) -> tensor<4xf32> {
    return %x : tensor<4xf32>
  }
}
