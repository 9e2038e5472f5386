// Round trip: parse, print, parse again (custom and generic forms).
// RUN: kiln-opt %s | kiln-opt | FileCheck %s
// RUN: kiln-opt %s --mlir-print-op-generic | kiln-opt | FileCheck %s

// CHECK-LABEL: func.func @block
func.func @block(%ids: tensor<2x8xi64>, %labels: tensor<2x8xi64>, %table: tensor<64x32xf32>,
                 %norm: tensor<32xf32>, %wq: tensor<64x32xf32>, %wk: tensor<32x32xf32>,
                 %wv: tensor<32x32xf32>, %qn: tensor<16xf32>, %w1: tensor<48x32xf32>)
    -> tensor<f32> {
  // CHECK: kiln.embedding %{{.*}}, %{{.*}} {fqn = "tok_embeddings"} : (tensor<64x32xf32>, tensor<2x8xi64>) -> tensor<2x8x32xf32>
  %h = kiln.embedding %table, %ids {fqn = "tok_embeddings"} : (tensor<64x32xf32>, tensor<2x8xi64>) -> tensor<2x8x32xf32>
  // CHECK: kiln.rms_norm {{.*}} {eps = 9.99999997E-7 : f32, fqn = "layers.0.attention_norm"}
  %x = kiln.rms_norm %h, %norm {eps = 1.0e-6 : f32, fqn = "layers.0.attention_norm"} : (tensor<2x8x32xf32>, tensor<32xf32>) -> tensor<2x8x32xf32>
  // CHECK: kiln.linear {{.*}} {fqn = "layers.0.attention.wq"} : (tensor<2x8x32xf32>, tensor<64x32xf32>) -> tensor<2x8x64xf32>
  %q = kiln.linear %x, %wq {fqn = "layers.0.attention.wq"} : (tensor<2x8x32xf32>, tensor<64x32xf32>) -> tensor<2x8x64xf32>
  %k = kiln.linear %x, %wk {fqn = "layers.0.attention.wk"} : (tensor<2x8x32xf32>, tensor<32x32xf32>) -> tensor<2x8x32xf32>
  %v = kiln.linear %x, %wv {fqn = "layers.0.attention.wv"} : (tensor<2x8x32xf32>, tensor<32x32xf32>) -> tensor<2x8x32xf32>
  // CHECK: kiln.reshape {{.*}} {fqn = "layers.0.attention.q_heads", shape = array<i64: 2, 8, 4, 16>} : (tensor<2x8x64xf32>) -> tensor<2x8x4x16xf32>
  %q4 = kiln.reshape %q {shape = array<i64: 2, 8, 4, 16>, fqn = "layers.0.attention.q_heads"} : (tensor<2x8x64xf32>) -> tensor<2x8x4x16xf32>
  %k4 = kiln.reshape %k {shape = array<i64: 2, 8, 2, 16>, fqn = "layers.0.attention.k_heads"} : (tensor<2x8x32xf32>) -> tensor<2x8x2x16xf32>
  %v4 = kiln.reshape %v {shape = array<i64: 2, 8, 2, 16>, fqn = "layers.0.attention.v_heads"} : (tensor<2x8x32xf32>) -> tensor<2x8x2x16xf32>
  %qnn = kiln.rms_norm %q4, %qn {eps = 1.0e-6 : f32, fqn = "layers.0.attention.q_norm"} : (tensor<2x8x4x16xf32>, tensor<16xf32>) -> tensor<2x8x4x16xf32>
  // CHECK: kiln.rope_cache {fqn = "rope_cache", head_dim = 16 : i64, seq_len = 8 : i64, theta = 1.000000e+06 : f64} : tensor<8x32xf32>
  %cache = kiln.rope_cache {theta = 1.0e6 : f64, seq_len = 8 : i64, head_dim = 16 : i64, fqn = "rope_cache"} : tensor<8x32xf32>
  // CHECK: kiln.rope_cache {fqn = "rope_cache", head_dim = 16 : i64, llama3_scaling = array<f64: 8.000000e+00, 1.000000e+00, 4.000000e+00, 8.192000e+03>, seq_len = 8 : i64, theta = 5.000000e+05 : f64} : tensor<8x32xf32>
  %llama = kiln.rope_cache {theta = 5.0e5 : f64, seq_len = 8 : i64, head_dim = 16 : i64, llama3_scaling = array<f64: 8.0, 1.0, 4.0, 8192.0>, fqn = "rope_cache"} : tensor<8x32xf32>
  // CHECK: kiln.rope {{.*}} {fqn = "layers.0.attention.rope"} : (tensor<2x8x4x16xf32>, tensor<2x8x2x16xf32>, tensor<8x32xf32>) -> (tensor<2x8x4x16xf32>, tensor<2x8x2x16xf32>)
  %qr, %kr = kiln.rope %qnn, %k4, %cache {fqn = "layers.0.attention.rope"} : (tensor<2x8x4x16xf32>, tensor<2x8x2x16xf32>, tensor<8x32xf32>) -> (tensor<2x8x4x16xf32>, tensor<2x8x2x16xf32>)
  // CHECK: kiln.attention {{.*}} {causal, fqn = "layers.0.attention.inner_attention", scale = 2.500000e-01 : f32} : (tensor<2x8x4x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x2x16xf32>) -> (tensor<2x8x4x16xf32>, tensor<2x4x8xf32>)
  %o, %lse = kiln.attention %qr, %kr, %v4 {causal, scale = 0.25 : f32, fqn = "layers.0.attention.inner_attention"} : (tensor<2x8x4x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x2x16xf32>) -> (tensor<2x8x4x16xf32>, tensor<2x4x8xf32>)
  %o3 = kiln.reshape %o {shape = array<i64: 2, 8, 64>, fqn = "layers.0.attention.merge_heads"} : (tensor<2x8x4x16xf32>) -> tensor<2x8x64xf32>
  %g = kiln.linear %h, %w1 {fqn = "layers.0.feed_forward.w1"} : (tensor<2x8x32xf32>, tensor<48x32xf32>) -> tensor<2x8x48xf32>
  // CHECK: kiln.swiglu {{.*}} {fqn = "layers.0.feed_forward.act"} : (tensor<2x8x48xf32>, tensor<2x8x48xf32>) -> tensor<2x8x48xf32>
  %s = kiln.swiglu %g, %g {fqn = "layers.0.feed_forward.act"} : (tensor<2x8x48xf32>, tensor<2x8x48xf32>) -> tensor<2x8x48xf32>
  // CHECK: kiln.add {{.*}} {fqn = "layers.0.attention_residual"} : (tensor<2x8x32xf32>, tensor<2x8x32xf32>) -> tensor<2x8x32xf32>
  %r = kiln.add %h, %x {fqn = "layers.0.attention_residual"} : (tensor<2x8x32xf32>, tensor<2x8x32xf32>) -> tensor<2x8x32xf32>
  %logits = kiln.linear %r, %table {fqn = "output"} : (tensor<2x8x32xf32>, tensor<64x32xf32>) -> tensor<2x8x64xf32>
  // CHECK: kiln.cross_entropy {{.*}}, %arg1 {fqn = "loss"} : (tensor<2x8x64xf32>, tensor<2x8xi64>) -> tensor<f32>
  %loss = kiln.cross_entropy %logits, %labels {fqn = "loss"} : (tensor<2x8x64xf32>, tensor<2x8xi64>) -> tensor<f32>
  return %loss : tensor<f32>
}

// bf16 storage and i32 ids are accepted too.
// CHECK-LABEL: func.func @bf16
func.func @bf16(%table: tensor<64x32xbf16>, %ids: tensor<4xi32>) -> tensor<4x32xbf16> {
  // CHECK: kiln.embedding {{.*}} : (tensor<64x32xbf16>, tensor<4xi32>) -> tensor<4x32xbf16>
  %e = kiln.embedding %table, %ids {fqn = "tok_embeddings"} : (tensor<64x32xbf16>, tensor<4xi32>) -> tensor<4x32xbf16>
  return %e : tensor<4x32xbf16>
}

// Backward and optimizer ops round-trip too.
// CHECK-LABEL: func.func @backward_and_optimizer
func.func @backward_and_optimizer(%g: tensor<2x8x32xf32>, %x: tensor<2x8x32xf32>, %w: tensor<32xf32>,
                                  %ids: tensor<2x8xi64>, %wl: tensor<64x32xf32>, %gl: tensor<2x8x64xf32>,
                                  %q: tensor<2x8x4x16xf32>, %k: tensor<2x8x2x16xf32>, %cache: tensor<8x32xf32>,
                                  %lse: tensor<2x4x8xf32>, %logits: tensor<2x8x64xf32>, %step: tensor<i64>)
    -> (tensor<32xf32>, tensor<i64>) {
  // CHECK: kiln.constant {fqn = "loss.seed_grad", value = dense<1.000000e+00> : tensor<f32>} : tensor<f32>
  %seed = kiln.constant {fqn = "loss.seed_grad", value = dense<1.0> : tensor<f32>} : tensor<f32>
  // CHECK: kiln.embedding_backward {{.*}} {fqn = "tok_embeddings", vocab_size = 64 : i64} : (tensor<2x8x32xf32>, tensor<2x8xi64>) -> tensor<64x32xf32>
  %dt = kiln.embedding_backward %g, %ids {fqn = "tok_embeddings", vocab_size = 64 : i64} : (tensor<2x8x32xf32>, tensor<2x8xi64>) -> tensor<64x32xf32>
  // CHECK: kiln.rms_norm_backward {{.*}} : (tensor<2x8x32xf32>, tensor<2x8x32xf32>, tensor<32xf32>) -> (tensor<2x8x32xf32>, tensor<32xf32>)
  %dx, %dw = kiln.rms_norm_backward %g, %x, %w {eps = 1.0e-6 : f32, fqn = "norm"} : (tensor<2x8x32xf32>, tensor<2x8x32xf32>, tensor<32xf32>) -> (tensor<2x8x32xf32>, tensor<32xf32>)
  // CHECK: kiln.linear_backward_data {{.*}} : (tensor<2x8x64xf32>, tensor<64x32xf32>) -> tensor<2x8x32xf32>
  %di = kiln.linear_backward_data %gl, %wl {fqn = "output"} : (tensor<2x8x64xf32>, tensor<64x32xf32>) -> tensor<2x8x32xf32>
  // CHECK: kiln.linear_backward_weight {{.*}} : (tensor<2x8x64xf32>, tensor<2x8x32xf32>) -> tensor<64x32xf32>
  %dwl = kiln.linear_backward_weight %gl, %x {fqn = "output"} : (tensor<2x8x64xf32>, tensor<2x8x32xf32>) -> tensor<64x32xf32>
  // CHECK: kiln.rope_backward {{.*}} : (tensor<2x8x4x16xf32>, tensor<2x8x2x16xf32>, tensor<8x32xf32>) -> (tensor<2x8x4x16xf32>, tensor<2x8x2x16xf32>)
  %dq, %dk = kiln.rope_backward %q, %k, %cache {fqn = "layers.0.attention.rope"} : (tensor<2x8x4x16xf32>, tensor<2x8x2x16xf32>, tensor<8x32xf32>) -> (tensor<2x8x4x16xf32>, tensor<2x8x2x16xf32>)
  // CHECK: kiln.attention_backward {{.*}} {causal, fqn = "layers.0.attention.inner_attention", scale = 2.500000e-01 : f32}
  %aq, %ak, %av = kiln.attention_backward %q, %q, %k, %k, %q, %lse {causal, scale = 0.25 : f32, fqn = "layers.0.attention.inner_attention"} : (tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x4x16xf32>, tensor<2x4x8xf32>) -> (tensor<2x8x4x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x2x16xf32>)
  // CHECK: kiln.swiglu_backward
  %dgate, %dup = kiln.swiglu_backward %g, %x, %x {fqn = "layers.0.feed_forward.swiglu"} : (tensor<2x8x32xf32>, tensor<2x8x32xf32>, tensor<2x8x32xf32>) -> (tensor<2x8x32xf32>, tensor<2x8x32xf32>)
  // CHECK: kiln.cross_entropy_backward {{.*}} : (tensor<2x8x64xf32>, tensor<2x8xi64>, tensor<f32>) -> tensor<2x8x64xf32>
  %dlog = kiln.cross_entropy_backward %logits, %ids, %seed {fqn = "loss"} : (tensor<2x8x64xf32>, tensor<2x8xi64>, tensor<f32>) -> tensor<2x8x64xf32>
  // CHECK: kiln.global_norm {{.*}} : (tensor<64x32xf32>, tensor<32xf32>) -> tensor<f32>
  %norm = kiln.global_norm %dt, %dw {fqn = "optimizer.grad_norm"} : (tensor<64x32xf32>, tensor<32xf32>) -> tensor<f32>
  // CHECK: kiln.clip_coef {{.*}} {fqn = "optimizer.clip_grad_norm", max_norm = 1.000000e+00 : f64}
  %coef = kiln.clip_coef %norm {max_norm = 1.0 : f64, fqn = "optimizer.clip_grad_norm"} : (tensor<f32>) -> tensor<f32>
  // CHECK: kiln.lr_schedule {{.*}} {decay_steps = 10 : i64, decay_type = #kiln.decay_type<cosine>
  %lr = kiln.lr_schedule %step {lr = 3.0e-3 : f64, warmup_steps = 2 : i64, stable_steps = 5 : i64, decay_steps = 10 : i64, decay_type = #kiln.decay_type<cosine>, min_lr_factor = 0.1 : f64, fqn = "lr_scheduler"} : (tensor<i64>) -> tensor<f32>
  // CHECK: kiln.adamw {{.*}} : (tensor<32xf32>, tensor<32xf32>, tensor<32xf32>, tensor<32xf32>, tensor<i64>, tensor<f32>, tensor<f32>) -> (tensor<32xf32>, tensor<32xf32>, tensor<32xf32>)
  %p, %m, %v = kiln.adamw %w, %dw, %w, %w, %step, %lr, %coef {beta1 = 0.9 : f64, beta2 = 0.95 : f64, eps = 1.0e-8 : f64, weight_decay = 0.1 : f64, fqn = "optimizer.model.norm.weight"} : (tensor<32xf32>, tensor<32xf32>, tensor<32xf32>, tensor<32xf32>, tensor<i64>, tensor<f32>, tensor<f32>) -> (tensor<32xf32>, tensor<32xf32>, tensor<32xf32>)
  // CHECK: kiln.next_step {{.*}} : (tensor<i64>) -> tensor<i64>
  %next = kiln.next_step %step {fqn = "optimizer.step"} : (tensor<i64>) -> tensor<i64>
  return %p, %next : tensor<32xf32>, tensor<i64>
}

// The mixture-of-experts ops: the router (softmax, top-k), the grouped
// experts over stacked [experts, inter, hidden] weights, the load-balancing
// loss over two sparse layers and its scaling.
// CHECK-LABEL: func.func @moe
func.func @moe(%x: tensor<2x8x32xf32>, %logits: tensor<2x8x4xf32>, %logits1: tensor<2x8x4xf32>,
               %w1: tensor<4x12x32xf32>, %w3: tensor<4x12x32xf32>, %w2: tensor<4x32x12xf32>)
    -> (tensor<2x8x32xf32>, tensor<f32>) {
  // CHECK: kiln.router %{{.*}} {fqn = "layers.0.moe.router", norm_topk_prob, top_k = 2 : i64} : (tensor<2x8x4xf32>) -> (tensor<2x8x2xf32>, tensor<2x8x2xi64>, tensor<2x8x4xf32>)
  %w, %ids, %p = kiln.router %logits {norm_topk_prob, top_k = 2 : i64, fqn = "layers.0.moe.router"} : (tensor<2x8x4xf32>) -> (tensor<2x8x2xf32>, tensor<2x8x2xi64>, tensor<2x8x4xf32>)
  // Without norm_topk_prob the attribute is absent.
  // CHECK: kiln.router %{{.*}} {fqn = "layers.1.moe.router", top_k = 2 : i64} : (tensor<2x8x4xf32>) -> (tensor<2x8x2xf32>, tensor<2x8x2xi64>, tensor<2x8x4xf32>)
  %w1r, %ids1, %p1 = kiln.router %logits1 {top_k = 2 : i64, fqn = "layers.1.moe.router"} : (tensor<2x8x4xf32>) -> (tensor<2x8x2xf32>, tensor<2x8x2xi64>, tensor<2x8x4xf32>)
  // CHECK: kiln.grouped_experts {{.*}} {fqn = "layers.0.moe.experts"} : (tensor<2x8x32xf32>, tensor<2x8x2xf32>, tensor<2x8x2xi64>, tensor<4x12x32xf32>, tensor<4x12x32xf32>, tensor<4x32x12xf32>) -> tensor<2x8x32xf32>
  %y = kiln.grouped_experts %x, %w, %ids, %w1, %w3, %w2 {fqn = "layers.0.moe.experts"} : (tensor<2x8x32xf32>, tensor<2x8x2xf32>, tensor<2x8x2xi64>, tensor<4x12x32xf32>, tensor<4x12x32xf32>, tensor<4x32x12xf32>) -> tensor<2x8x32xf32>
  // One probs and one experts operand per sparse layer.
  // CHECK: kiln.load_balancing_loss {{.*}} {fqn = "aux_loss"} : (tensor<2x8x4xf32>, tensor<2x8x4xf32>, tensor<2x8x2xi64>, tensor<2x8x2xi64>) -> tensor<f32>
  %aux = kiln.load_balancing_loss %p, %p1, %ids, %ids1 {fqn = "aux_loss"} : (tensor<2x8x4xf32>, tensor<2x8x4xf32>, tensor<2x8x2xi64>, tensor<2x8x2xi64>) -> tensor<f32>
  // CHECK: kiln.scale {{.*}} {factor = 1.000000e-03 : f64, fqn = "aux_loss.scaled"} : (tensor<f32>) -> tensor<f32>
  %s = kiln.scale %aux {factor = 1.0e-3 : f64, fqn = "aux_loss.scaled"} : (tensor<f32>) -> tensor<f32>
  return %y, %s : tensor<2x8x32xf32>, tensor<f32>
}

// The grouped experts accept i32 ids and bf16 experts (weights stay f32).
// CHECK-LABEL: func.func @moe_i32_ids
func.func @moe_i32_ids(%x: tensor<6x16xbf16>, %w: tensor<6x2xf32>, %ids: tensor<6x2xi32>,
                       %w1: tensor<3x8x16xbf16>, %w3: tensor<3x8x16xbf16>, %w2: tensor<3x16x8xbf16>)
    -> tensor<6x16xbf16> {
  // CHECK: kiln.grouped_experts {{.*}} : (tensor<6x16xbf16>, tensor<6x2xf32>, tensor<6x2xi32>, tensor<3x8x16xbf16>, tensor<3x8x16xbf16>, tensor<3x16x8xbf16>) -> tensor<6x16xbf16>
  %y = kiln.grouped_experts %x, %w, %ids, %w1, %w3, %w2 {fqn = "layers.3.moe.experts"} : (tensor<6x16xbf16>, tensor<6x2xf32>, tensor<6x2xi32>, tensor<3x8x16xbf16>, tensor<3x8x16xbf16>, tensor<3x16x8xbf16>) -> tensor<6x16xbf16>
  return %y : tensor<6x16xbf16>
}

// The MoE backward ops round-trip too.
// CHECK-LABEL: func.func @moe_backward
func.func @moe_backward(%dy: tensor<2x8x32xf32>, %x: tensor<2x8x32xf32>, %w: tensor<2x8x2xf32>,
                        %ids: tensor<2x8x2xi64>, %ids1: tensor<2x8x2xi32>, %p: tensor<2x8x4xf32>,
                        %w1: tensor<4x12x32xf32>, %w3: tensor<4x12x32xf32>, %w2: tensor<4x32x12xf32>,
                        %g: tensor<f32>)
    -> (tensor<2x8x4xf32>, tensor<4x32x12xf32>, tensor<2x8x4xf32>) {
  // CHECK: kiln.router_backward {{.*}} {fqn = "layers.0.moe.router", norm_topk_prob} : (tensor<2x8x4xf32>, tensor<2x8x2xi64>, tensor<2x8x2xf32>, tensor<2x8x4xf32>) -> tensor<2x8x4xf32>
  %dlogits = kiln.router_backward %p, %ids, %w, %p {norm_topk_prob, fqn = "layers.0.moe.router"} : (tensor<2x8x4xf32>, tensor<2x8x2xi64>, tensor<2x8x2xf32>, tensor<2x8x4xf32>) -> tensor<2x8x4xf32>
  // CHECK: kiln.grouped_experts_backward {{.*}} {fqn = "layers.0.moe.experts"} : (tensor<2x8x32xf32>, tensor<2x8x32xf32>, tensor<2x8x2xf32>, tensor<2x8x2xi64>, tensor<4x12x32xf32>, tensor<4x12x32xf32>, tensor<4x32x12xf32>) -> (tensor<2x8x32xf32>, tensor<2x8x2xf32>, tensor<4x12x32xf32>, tensor<4x12x32xf32>, tensor<4x32x12xf32>)
  %dx, %dw, %dw1, %dw3, %dw2 = kiln.grouped_experts_backward %dy, %x, %w, %ids, %w1, %w3, %w2 {fqn = "layers.0.moe.experts"} : (tensor<2x8x32xf32>, tensor<2x8x32xf32>, tensor<2x8x2xf32>, tensor<2x8x2xi64>, tensor<4x12x32xf32>, tensor<4x12x32xf32>, tensor<4x32x12xf32>) -> (tensor<2x8x32xf32>, tensor<2x8x2xf32>, tensor<4x12x32xf32>, tensor<4x12x32xf32>, tensor<4x32x12xf32>)
  // One probs gradient per layer, of num_experts columns, i32 ids included.
  // CHECK: kiln.load_balancing_loss_backward {{.*}} {fqn = "aux_loss", num_experts = 4 : i64} : (tensor<f32>, tensor<2x8x2xi64>, tensor<2x8x2xi32>) -> (tensor<2x8x4xf32>, tensor<2x8x4xf32>)
  %dp0, %dp1 = kiln.load_balancing_loss_backward %g, %ids, %ids1 {num_experts = 4 : i64, fqn = "aux_loss"} : (tensor<f32>, tensor<2x8x2xi64>, tensor<2x8x2xi32>) -> (tensor<2x8x4xf32>, tensor<2x8x4xf32>)
  return %dlogits, %dw2, %dp1 : tensor<2x8x4xf32>, tensor<4x32x12xf32>, tensor<2x8x4xf32>
}

// A substituted rope, its layout transposes and its backward.
// CHECK-LABEL: func.func @kernel_call
// CHECK: %[[QT:.*]] = kiln.transpose %arg0 {fqn = "layers.0.attention.rope", permutation = array<i64: 0, 2, 1, 3>} : (tensor<1x256x2x8xf32>) -> tensor<1x2x256x8xf32>
// CHECK: %[[R:.*]]:2 = kiln.kernel "nki_rope"(%[[QT]], %[[QT]], %arg1) {fqn = "layers.0.attention.rope", options = {}, rule = "rope", target = "kiln.rope"}
// CHECK: kiln.kernel_backward "nki_rope"(%[[R]]#0, %[[R]]#1, %arg1) {fqn = "layers.0.attention.rope", options = {}, rule = "rope", target = "kiln.rope"}
func.func @kernel_call(%q: tensor<1x256x2x8xf32>, %cache: tensor<256x16xf32>)
    -> (tensor<1x2x256x8xf32>, tensor<1x2x256x8xf32>) {
  %qt = kiln.transpose %q {permutation = array<i64: 0, 2, 1, 3>, fqn = "layers.0.attention.rope"}
      : (tensor<1x256x2x8xf32>) -> tensor<1x2x256x8xf32>
  %r:2 = kiln.kernel "nki_rope"(%qt, %qt, %cache)
      {rule = "rope", target = "kiln.rope", options = {}, fqn = "layers.0.attention.rope"}
      : (tensor<1x2x256x8xf32>, tensor<1x2x256x8xf32>, tensor<256x16xf32>)
      -> (tensor<1x2x256x8xf32>, tensor<1x2x256x8xf32>)
  %d:2 = kiln.kernel_backward "nki_rope"(%r#0, %r#1, %cache)
      {rule = "rope", target = "kiln.rope", options = {}, fqn = "layers.0.attention.rope"}
      : (tensor<1x2x256x8xf32>, tensor<1x2x256x8xf32>, tensor<256x16xf32>)
      -> (tensor<1x2x256x8xf32>, tensor<1x2x256x8xf32>)
  return %d#0, %d#1 : tensor<1x2x256x8xf32>, tensor<1x2x256x8xf32>
}

// Loss parallel on a vocabulary shard of 32 of 64 ids, and the
// vocabulary-parallel embedding.
// CHECK-LABEL: func.func @loss_parallel
// CHECK: kiln.embedding %arg4, %arg1 {fqn = "tok_embeddings", vocab_axes = array<i16: 2>} : (tensor<32x16xf32>, tensor<2x8xi64>) -> tensor<2x8x16xf32>
// CHECK: kiln.vocab_parallel_max %arg0 {fqn = "loss"} : (tensor<2x8x32xf32>) -> tensor<2x8xf32>
// CHECK: kiln.vocab_parallel_stats %arg0, %arg2, %arg1 {fqn = "loss", vocab_axes = array<i16: 2>} : (tensor<2x8x32xf32>, tensor<2x8xf32>, tensor<2x8xi64>) -> tensor<2x8x2xf32>
// CHECK: kiln.vocab_parallel_loss %arg2, %arg3 {fqn = "loss", total_positions = 32 : i64} : (tensor<2x8xf32>, tensor<2x8x2xf32>) -> tensor<f32>
// CHECK: kiln.vocab_parallel_loss_backward %arg0, %arg1, {{.*}}, %arg2, %arg3 {fqn = "loss", vocab_axes = array<i16: 2>} : (tensor<2x8x32xf32>, tensor<2x8xi64>, tensor<f32>, tensor<2x8xf32>, tensor<2x8x2xf32>) -> tensor<2x8x32xf32>
// CHECK: kiln.embedding_backward {{.*}} {fqn = "tok_embeddings", vocab_axes = array<i16: 2>, vocab_size = 32 : i64} : (tensor<2x8x16xf32>, tensor<2x8xi64>) -> tensor<32x16xf32>
func.func @loss_parallel(%logits: tensor<2x8x32xf32>, %labels: tensor<2x8xi64>,
                         %max: tensor<2x8xf32>, %stats: tensor<2x8x2xf32>,
                         %table: tensor<32x16xf32>)
    -> (tensor<f32>, tensor<2x8x2xf32>, tensor<2x8xf32>, tensor<2x8x32xf32>, tensor<32x16xf32>) {
  %h = kiln.embedding %table, %labels {fqn = "tok_embeddings", vocab_axes = array<i16: 2>}
      : (tensor<32x16xf32>, tensor<2x8xi64>) -> tensor<2x8x16xf32>
  %m = kiln.vocab_parallel_max %logits {fqn = "loss"} : (tensor<2x8x32xf32>) -> tensor<2x8xf32>
  %s = kiln.vocab_parallel_stats %logits, %max, %labels {fqn = "loss", vocab_axes = array<i16: 2>}
      : (tensor<2x8x32xf32>, tensor<2x8xf32>, tensor<2x8xi64>) -> tensor<2x8x2xf32>
  %loss = kiln.vocab_parallel_loss %max, %stats {fqn = "loss", total_positions = 32 : i64}
      : (tensor<2x8xf32>, tensor<2x8x2xf32>) -> tensor<f32>
  %d = kiln.vocab_parallel_loss_backward %logits, %labels, %loss, %max, %stats
      {fqn = "loss", vocab_axes = array<i16: 2>}
      : (tensor<2x8x32xf32>, tensor<2x8xi64>, tensor<f32>, tensor<2x8xf32>, tensor<2x8x2xf32>)
      -> tensor<2x8x32xf32>
  %dt = kiln.embedding_backward %h, %labels {fqn = "tok_embeddings", vocab_size = 32 : i64, vocab_axes = array<i16: 2>}
      : (tensor<2x8x16xf32>, tensor<2x8xi64>) -> tensor<32x16xf32>
  return %loss, %s, %m, %d, %dt : tensor<f32>, tensor<2x8x2xf32>, tensor<2x8xf32>, tensor<2x8x32xf32>, tensor<32x16xf32>
}
