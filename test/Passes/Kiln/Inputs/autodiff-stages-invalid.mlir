// Stage functions kiln-autodiff's pipeline-stages refuses (pipeline-split.mlir
// runs this): a stage before the last returning a value no transfer names,
// and a last stage returning no loss.
func.func @loss_stage0(%x: tensor<2xf32> {kiln.param = "w"}) -> tensor<2xf32>
    attributes {kiln.stage = 0 : i64} {
  return %x : tensor<2xf32>
}

func.func @loss_stage1(%x: tensor<2xf32> {kiln.transfer = 0 : i64}) -> tensor<f32>
    attributes {kiln.stage = 1 : i64} {
  %s = kiln.constant {fqn = "loss", value = dense<0.0> : tensor<f32>} : tensor<f32>
  return %s : tensor<f32>
}

// -----

func.func @loss_stage0(%x: tensor<2xf32> {kiln.param = "w"}) -> tensor<2xf32>
    attributes {kiln.stage = 0 : i64} {
  return %x : tensor<2xf32>
}
