func.func @adamw_step_type(%p: tensor<32xf32>, %step: tensor<i32>, %lr: tensor<f32>) {
  %0:3 = kiln.adamw %p, %p, %p, %p, %step, %lr, %lr {beta1 = 0.9 : f64, beta2 = 0.95 : f64, eps = 1.0e-8 : f64, weight_decay = 0.1 : f64, fqn = "optimizer.w"} : (tensor<32xf32>, tensor<32xf32>, tensor<32xf32>, tensor<32xf32>, tensor<i32>, tensor<f32>, tensor<f32>) -> (tensor<32xf32>, tensor<32xf32>, tensor<32xf32>)
  return
}
