func.func @adamw_moment_type(%p: tensor<32xf32>, %m: tensor<16xf32>, %step: tensor<i64>, %lr: tensor<f32>) {
  %0:3 = kiln.adamw %p, %p, %m, %p, %step, %lr, %lr {beta1 = 0.9 : f64, beta2 = 0.95 : f64, eps = 1.0e-8 : f64, weight_decay = 0.1 : f64, fqn = "optimizer.model.norm.weight"} : (tensor<32xf32>, tensor<32xf32>, tensor<16xf32>, tensor<32xf32>, tensor<i64>, tensor<f32>, tensor<f32>) -> (tensor<32xf32>, tensor<32xf32>, tensor<32xf32>)
  return
}
