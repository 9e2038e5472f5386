func.func @constant_not_float() {
  %0 = kiln.constant {fqn = "loss.seed_grad", value = dense<1> : tensor<i64>} : tensor<i64>
  return
}
