func.func @clip_coef_rank(%n: tensor<2xf32>) {
  %0 = kiln.clip_coef %n {max_norm = 1.0 : f64, fqn = "optimizer.clip_grad_norm"} : (tensor<2xf32>) -> tensor<f32>
  return
}
