func.func @load_balancing_loss_no_layers() {
  %0 = kiln.load_balancing_loss {fqn = "aux_loss"} : () -> tensor<f32>
  return
}
