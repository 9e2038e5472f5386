func.func @lr_schedule_decay_type_string(%step: tensor<i64>) {
  %lr = kiln.lr_schedule %step {lr = 3.0e-3 : f64, warmup_steps = 2 : i64, stable_steps = 5 : i64, decay_steps = 10 : i64, decay_type = "linear", min_lr_factor = 0.1 : f64, fqn = "lr_scheduler"} : (tensor<i64>) -> tensor<f32>
  return
}
