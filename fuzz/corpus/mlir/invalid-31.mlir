func.func @global_norm_empty() {
  %0 = kiln.global_norm {fqn = "optimizer.grad_norm"} : () -> tensor<f32>
  return
}
