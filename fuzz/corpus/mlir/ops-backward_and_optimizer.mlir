func.func @backward_and_optimizer(%g: tensor<2x8x32xf32>, %x: tensor<2x8x32xf32>, %w: tensor<32xf32>,
                                  %ids: tensor<2x8xi64>, %wl: tensor<64x32xf32>, %gl: tensor<2x8x64xf32>,
                                  %q: tensor<2x8x4x16xf32>, %k: tensor<2x8x2x16xf32>, %cache: tensor<8x32xf32>,
                                  %lse: tensor<2x4x8xf32>, %logits: tensor<2x8x64xf32>, %step: tensor<i64>)
    -> (tensor<32xf32>, tensor<i64>) {
  %seed = kiln.constant {fqn = "loss.seed_grad", value = dense<1.0> : tensor<f32>} : tensor<f32>
  %dt = kiln.embedding_backward %g, %ids {fqn = "tok_embeddings", vocab_size = 64 : i64} : (tensor<2x8x32xf32>, tensor<2x8xi64>) -> tensor<64x32xf32>
  %dx, %dw = kiln.rms_norm_backward %g, %x, %w {eps = 1.0e-6 : f32, fqn = "norm"} : (tensor<2x8x32xf32>, tensor<2x8x32xf32>, tensor<32xf32>) -> (tensor<2x8x32xf32>, tensor<32xf32>)
  %di = kiln.linear_backward_data %gl, %wl {fqn = "output"} : (tensor<2x8x64xf32>, tensor<64x32xf32>) -> tensor<2x8x32xf32>
  %dwl = kiln.linear_backward_weight %gl, %x {fqn = "output"} : (tensor<2x8x64xf32>, tensor<2x8x32xf32>) -> tensor<64x32xf32>
  %dq, %dk = kiln.rope_backward %q, %k, %cache {fqn = "layers.0.attention.rope"} : (tensor<2x8x4x16xf32>, tensor<2x8x2x16xf32>, tensor<8x32xf32>) -> (tensor<2x8x4x16xf32>, tensor<2x8x2x16xf32>)
  %aq, %ak, %av = kiln.attention_backward %q, %q, %k, %k, %q, %lse {causal, scale = 0.25 : f32, fqn = "layers.0.attention.inner_attention"} : (tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x4x16xf32>, tensor<2x4x8xf32>) -> (tensor<2x8x4x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x2x16xf32>)
  %dgate, %dup = kiln.swiglu_backward %g, %x, %x {fqn = "layers.0.feed_forward.swiglu"} : (tensor<2x8x32xf32>, tensor<2x8x32xf32>, tensor<2x8x32xf32>) -> (tensor<2x8x32xf32>, tensor<2x8x32xf32>)
  %dlog = kiln.cross_entropy_backward %logits, %ids, %seed {fqn = "loss"} : (tensor<2x8x64xf32>, tensor<2x8xi64>, tensor<f32>) -> tensor<2x8x64xf32>
  %norm = kiln.global_norm %dt, %dw {fqn = "optimizer.grad_norm"} : (tensor<64x32xf32>, tensor<32xf32>) -> tensor<f32>
  %coef = kiln.clip_coef %norm {max_norm = 1.0 : f64, fqn = "optimizer.clip_grad_norm"} : (tensor<f32>) -> tensor<f32>
  %lr = kiln.lr_schedule %step {lr = 3.0e-3 : f64, warmup_steps = 2 : i64, stable_steps = 5 : i64, decay_steps = 10 : i64, decay_type = #kiln.decay_type<cosine>, min_lr_factor = 0.1 : f64, fqn = "lr_scheduler"} : (tensor<i64>) -> tensor<f32>
  %p, %m, %v = kiln.adamw %w, %dw, %w, %w, %step, %lr, %coef {beta1 = 0.9 : f64, beta2 = 0.95 : f64, eps = 1.0e-8 : f64, weight_decay = 0.1 : f64, fqn = "optimizer.model.norm.weight"} : (tensor<32xf32>, tensor<32xf32>, tensor<32xf32>, tensor<32xf32>, tensor<i64>, tensor<f32>, tensor<f32>) -> (tensor<32xf32>, tensor<32xf32>, tensor<32xf32>)
  %next = kiln.next_step %step {fqn = "optimizer.step"} : (tensor<i64>) -> tensor<i64>
  return %p, %next : tensor<32xf32>, tensor<i64>
}
