// Every verifier error names the op and its fqn.
// RUN: kiln-opt %s -split-input-file -verify-diagnostics

func.func @linear_in_mismatch(%x: tensor<2x8x32xf32>, %w: tensor<64x16xf32>) {
  // expected-error@+2 {{'kiln.linear' op (fqn 'layers.0.attention.wq'): weight 'tensor<64x16xf32>' must be [out, in] with in = 32}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = kiln.linear %x, %w {fqn = "layers.0.attention.wq"} : (tensor<2x8x32xf32>, tensor<64x16xf32>) -> tensor<2x8x64xf32>
  return
}

// -----

func.func @linear_weight_rank(%x: tensor<2x8x32xf32>, %w: tensor<64x32x1xf32>) {
  // expected-error@+2 {{'kiln.linear' op (fqn 'output'): weight must have rank 2, got 'tensor<64x32x1xf32>'}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = kiln.linear %x, %w {fqn = "output"} : (tensor<2x8x32xf32>, tensor<64x32x1xf32>) -> tensor<2x8x64xf32>
  return
}

// -----

func.func @linear_mixed_dtypes(%x: tensor<2x32xf32>, %w: tensor<64x32xbf16>) {
  // expected-error@+2 {{'kiln.linear' op (fqn 'layers.1.feed_forward.w1'): weight has element type 'bf16' but the op computes in 'f32'}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = kiln.linear %x, %w {fqn = "layers.1.feed_forward.w1"} : (tensor<2x32xf32>, tensor<64x32xbf16>) -> tensor<2x64xf32>
  return
}

// -----

func.func @linear_wrong_result(%x: tensor<2x32xf32>, %w: tensor<64x32xf32>) {
  // expected-error@+2 {{inferred type(s) 'tensor<2x64xf32>' are incompatible with return type(s) of operation 'tensor<2x32xf32>'}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = kiln.linear %x, %w {fqn = "output"} : (tensor<2x32xf32>, tensor<64x32xf32>) -> tensor<2x32xf32>
  return
}

// -----

func.func @dynamic_shape(%x: tensor<?x32xf32>, %w: tensor<64x32xf32>) {
  // expected-error@+2 {{'kiln.linear' op (fqn 'output'): input must have a static shape, got 'tensor<?x32xf32>'}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = kiln.linear %x, %w {fqn = "output"} : (tensor<?x32xf32>, tensor<64x32xf32>) -> tensor<?x64xf32>
  return
}

// -----

func.func @missing_fqn(%x: tensor<2x32xf32>, %w: tensor<64x32xf32>) {
  // expected-error@+1 {{requires attribute 'fqn'}}
  %0 = kiln.linear %x, %w : (tensor<2x32xf32>, tensor<64x32xf32>) -> tensor<2x64xf32>
  return
}

// -----

func.func @embedding_float_ids(%t: tensor<64x32xf32>, %ids: tensor<2x8xf32>) {
  // expected-error@+1 {{'kiln.embedding' op operand #1 must be ranked tensor of 64-bit signless integer or 32-bit signless integer values, but got 'tensor<2x8xf32>'}}
  %0 = kiln.embedding %t, %ids {fqn = "tok_embeddings"} : (tensor<64x32xf32>, tensor<2x8xf32>) -> tensor<2x8x32xf32>
  return
}

// -----

func.func @embedding_table_rank(%t: tensor<64xf32>, %ids: tensor<2x8xi64>) {
  // expected-error@+2 {{'kiln.embedding' op (fqn 'tok_embeddings'): table must have rank 2, got 'tensor<64xf32>'}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = kiln.embedding %t, %ids {fqn = "tok_embeddings"} : (tensor<64xf32>, tensor<2x8xi64>) -> tensor<2x8x32xf32>
  return
}

// -----

func.func @rms_norm_weight(%x: tensor<2x8x32xf32>, %w: tensor<16xf32>) {
  // expected-error@+2 {{'kiln.rms_norm' op (fqn 'layers.2.ffn_norm'): weight 'tensor<16xf32>' must match the normalized (last) dimension of 'tensor<2x8x32xf32>'}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = kiln.rms_norm %x, %w {eps = 1.0e-6 : f32, fqn = "layers.2.ffn_norm"} : (tensor<2x8x32xf32>, tensor<16xf32>) -> tensor<2x8x32xf32>
  return
}

// -----

func.func @rms_norm_eps(%x: tensor<2x8x32xf32>, %w: tensor<32xf32>) {
  // expected-error@+1 {{'kiln.rms_norm' op (fqn 'norm'): eps must be finite and positive, got 0}}
  %0 = kiln.rms_norm %x, %w {eps = 0.0 : f32, fqn = "norm"} : (tensor<2x8x32xf32>, tensor<32xf32>) -> tensor<2x8x32xf32>
  return
}

// -----

func.func @rms_norm_eps_inf(%x: tensor<2x8x32xf32>, %w: tensor<32xf32>) {
  // expected-error@+1 {{'kiln.rms_norm' op (fqn 'norm'): eps must be finite and positive, got INF}}
  %0 = kiln.rms_norm %x, %w {eps = 0x7F800000 : f32, fqn = "norm"} : (tensor<2x8x32xf32>, tensor<32xf32>) -> tensor<2x8x32xf32>
  return
}

// -----

// Every kiln op names its module: override rules and backward names go by it.
func.func @empty_fqn(%x: tensor<2x8x32xf32>, %w: tensor<32xf32>) {
  // expected-error@+1 {{'kiln.rms_norm' op needs a non-empty 'fqn' (its module path, e.g. "layers.0.attention.wq")}}
  %0 = kiln.rms_norm %x, %w {eps = 1.0e-6 : f32, fqn = ""} : (tensor<2x8x32xf32>, tensor<32xf32>) -> tensor<2x8x32xf32>
  return
}

// -----

func.func @empty_fqn_elementwise(%x: tensor<4xf32>) {
  // expected-error@+1 {{'kiln.add' op needs a non-empty 'fqn'}}
  %0 = kiln.add %x, %x {fqn = ""} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @rope_cache_shape(%q: tensor<1x8x4x16xf32>, %k: tensor<1x8x2x16xf32>, %c: tensor<8x16xf32>) {
  // expected-error@+2 {{'kiln.rope' op (fqn 'layers.11.attention.rope'): cache 'tensor<8x16xf32>' must be [seq, 2 * head_dim] = [8, 32]}}
  // expected-error@+1 {{failed to infer returned types}}
  %0:2 = kiln.rope %q, %k, %c {fqn = "layers.11.attention.rope"} : (tensor<1x8x4x16xf32>, tensor<1x8x2x16xf32>, tensor<8x16xf32>) -> (tensor<1x8x4x16xf32>, tensor<1x8x2x16xf32>)
  return
}

// -----

func.func @rope_k_seq(%q: tensor<1x8x4x16xf32>, %k: tensor<1x4x2x16xf32>, %c: tensor<8x32xf32>) {
  // expected-error@+2 {{'kiln.rope' op (fqn 'layers.0.attention.rope'): k 'tensor<1x4x2x16xf32>' must share batch, seq and head_dim with q 'tensor<1x8x4x16xf32>'}}
  // expected-error@+1 {{failed to infer returned types}}
  %0:2 = kiln.rope %q, %k, %c {fqn = "layers.0.attention.rope"} : (tensor<1x8x4x16xf32>, tensor<1x4x2x16xf32>, tensor<8x32xf32>) -> (tensor<1x8x4x16xf32>, tensor<1x4x2x16xf32>)
  return
}

// -----

func.func @rope_odd_head_dim(%q: tensor<1x8x4x15xf32>, %k: tensor<1x8x2x15xf32>, %c: tensor<8x30xf32>) {
  // expected-error@+2 {{'kiln.rope' op (fqn 'layers.0.attention.rope'): head_dim must be even, got 15}}
  // expected-error@+1 {{failed to infer returned types}}
  %0:2 = kiln.rope %q, %k, %c {fqn = "layers.0.attention.rope"} : (tensor<1x8x4x15xf32>, tensor<1x8x2x15xf32>, tensor<8x30xf32>) -> (tensor<1x8x4x15xf32>, tensor<1x8x2x15xf32>)
  return
}

// -----

func.func @rope_cache_odd() {
  // expected-error@+2 {{'kiln.rope_cache' op (fqn 'rope_cache'): head_dim must be positive and even, got 15}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = kiln.rope_cache {theta = 1.0e6 : f64, seq_len = 8 : i64, head_dim = 15 : i64, fqn = "rope_cache"} : tensor<8x30xf32>
  return
}

// -----

func.func @rope_cache_llama3_scaling() {
  // expected-error@+2 {{'kiln.rope_cache' op (fqn 'rope_cache'): llama3_scaling must be [factor > 0, low_freq_factor > 0, high_freq_factor > low_freq_factor, original_max_position_embeddings >= 1]}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = kiln.rope_cache {theta = 5.0e5 : f64, seq_len = 8 : i64, head_dim = 16 : i64, llama3_scaling = array<f64: 8.0, 4.0, 1.0, 8192.0>, fqn = "rope_cache"} : tensor<8x32xf32>
  return
}

// -----

func.func @attention_gqa(%q: tensor<1x8x4x16xf32>, %k: tensor<1x8x3x16xf32>, %v: tensor<1x8x3x16xf32>) {
  // expected-error@+2 {{'kiln.attention' op (fqn 'layers.5.attention.inner_attention'): query heads (4) must be a multiple of kv heads (3)}}
  // expected-error@+1 {{failed to infer returned types}}
  %0:2 = kiln.attention %q, %k, %v {causal, scale = 0.25 : f32, fqn = "layers.5.attention.inner_attention"} : (tensor<1x8x4x16xf32>, tensor<1x8x3x16xf32>, tensor<1x8x3x16xf32>) -> (tensor<1x8x4x16xf32>, tensor<1x4x8xf32>)
  return
}

// -----

func.func @attention_kv_mismatch(%q: tensor<1x8x4x16xf32>, %k: tensor<1x8x2x16xf32>, %v: tensor<1x8x1x16xf32>) {
  // expected-error@+2 {{'kiln.attention' op (fqn 'layers.0.attention.inner_attention'): k 'tensor<1x8x2x16xf32>' and v 'tensor<1x8x1x16xf32>' must have the same shape}}
  // expected-error@+1 {{failed to infer returned types}}
  %0:2 = kiln.attention %q, %k, %v {causal, scale = 0.25 : f32, fqn = "layers.0.attention.inner_attention"} : (tensor<1x8x4x16xf32>, tensor<1x8x2x16xf32>, tensor<1x8x1x16xf32>) -> (tensor<1x8x4x16xf32>, tensor<1x4x8xf32>)
  return
}

// -----

func.func @attention_head_dim(%q: tensor<1x8x4x16xf32>, %k: tensor<1x8x2x8xf32>, %v: tensor<1x8x2x8xf32>) {
  // expected-error@+2 {{'kiln.attention' op (fqn 'layers.0.attention.inner_attention'): k 'tensor<1x8x2x8xf32>' must share batch and head_dim with q 'tensor<1x8x4x16xf32>'}}
  // expected-error@+1 {{failed to infer returned types}}
  %0:2 = kiln.attention %q, %k, %v {causal, scale = 0.25 : f32, fqn = "layers.0.attention.inner_attention"} : (tensor<1x8x4x16xf32>, tensor<1x8x2x8xf32>, tensor<1x8x2x8xf32>) -> (tensor<1x8x4x16xf32>, tensor<1x4x8xf32>)
  return
}

// -----

// Context parallelism: q may be a block of k's sequence, never a length that
// does not divide it; a block needs the axes that split it; a head-tail
// layout has an even count of chunks dividing the sequence; query axes are
// the grid's.
func.func @attention_query_block_not_dividing(%q: tensor<1x3x4x16xf32>, %k: tensor<1x8x2x16xf32>) {
  // expected-error@+2 {{'kiln.attention' op (fqn 'layers.0.attention.inner_attention'): q's sequence (3) must be k's (8) or a block of it}}
  // expected-error@+1 {{failed to infer returned types}}
  %0:2 = kiln.attention %q, %k, %k {causal, scale = 0.25 : f32, fqn = "layers.0.attention.inner_attention", query_axes = array<i16: 0>} : (tensor<1x3x4x16xf32>, tensor<1x8x2x16xf32>, tensor<1x8x2x16xf32>) -> (tensor<1x3x4x16xf32>, tensor<1x4x3xf32>)
  return
}

// -----

func.func @attention_query_block_without_axes(%q: tensor<1x4x4x16xf32>, %k: tensor<1x8x2x16xf32>) {
  // expected-error@+1 {{'kiln.attention' op (fqn 'layers.0.attention.inner_attention'): q's sequence (4) is a block of k's (8) but 'query_axes' does not say which ranks split it}}
  %0:2 = kiln.attention %q, %k, %k {causal, scale = 0.25 : f32, fqn = "layers.0.attention.inner_attention"} : (tensor<1x4x4x16xf32>, tensor<1x8x2x16xf32>, tensor<1x8x2x16xf32>) -> (tensor<1x4x4x16xf32>, tensor<1x4x4xf32>)
  return
}

// -----

func.func @attention_head_tail_odd(%q: tensor<1x9x4x16xf32>, %k: tensor<1x9x2x16xf32>) {
  // expected-error@+1 {{'kiln.attention' op (fqn 'layers.0.attention.inner_attention'): head_tail_chunks = 3 must be even (2 x the context-parallel degree) and divide the sequence (9)}}
  %0:2 = kiln.attention %q, %k, %k {causal, scale = 0.25 : f32, fqn = "layers.0.attention.inner_attention", head_tail_chunks = 3 : i64} : (tensor<1x9x4x16xf32>, tensor<1x9x2x16xf32>, tensor<1x9x2x16xf32>) -> (tensor<1x9x4x16xf32>, tensor<1x4x9xf32>)
  return
}

// -----

func.func @attention_backward_head_tail_not_dividing(%q: tensor<1x6x4x16xf32>, %k: tensor<1x6x2x16xf32>, %lse: tensor<1x4x6xf32>) {
  // expected-error@+1 {{'kiln.attention_backward' op (fqn 'layers.0.attention.inner_attention'): head_tail_chunks = 4 must be even (2 x the context-parallel degree) and divide the sequence (6)}}
  %0:3 = kiln.attention_backward %q, %q, %k, %k, %q, %lse {causal, scale = 0.25 : f32, fqn = "layers.0.attention.inner_attention", head_tail_chunks = 4 : i64} : (tensor<1x6x4x16xf32>, tensor<1x6x4x16xf32>, tensor<1x6x2x16xf32>, tensor<1x6x2x16xf32>, tensor<1x6x4x16xf32>, tensor<1x4x6xf32>) -> (tensor<1x6x4x16xf32>, tensor<1x6x2x16xf32>, tensor<1x6x2x16xf32>)
  return
}

// -----

module attributes {kiln.grid_axes = ["dp_shard", "cp"]} {
  func.func @attention_query_axis_outside_grid(%q: tensor<1x4x4x16xf32>, %k: tensor<1x8x2x16xf32>) {
    // expected-error@+1 {{'kiln.attention' op (fqn 'layers.0.attention.inner_attention'): query_axes entry 2 is not an axis of the grid (2 axes)}}
    %0:2 = kiln.attention %q, %k, %k {causal, scale = 0.25 : f32, fqn = "layers.0.attention.inner_attention", query_axes = array<i16: 2>} : (tensor<1x4x4x16xf32>, tensor<1x8x2x16xf32>, tensor<1x8x2x16xf32>) -> (tensor<1x4x4x16xf32>, tensor<1x4x4xf32>)
    return
  }
}

// -----

func.func @swiglu_mismatch(%g: tensor<2x48xf32>, %u: tensor<2x32xf32>) {
  // expected-error@+1 {{'kiln.swiglu' op failed to verify that all of {gate, up, result} have same type}}
  %0 = kiln.swiglu %g, %u {fqn = "layers.0.feed_forward.swiglu"} : (tensor<2x48xf32>, tensor<2x32xf32>) -> tensor<2x48xf32>
  return
}

// -----

func.func @add_integer(%a: tensor<4xi64>, %b: tensor<4xi64>) {
  // expected-error@+1 {{'kiln.add' op operand #0 must be ranked tensor of 32-bit float or bfloat16 type or 16-bit float values, but got 'tensor<4xi64>'}}
  %0 = kiln.add %a, %b {fqn = "layers.0.ffn_residual"} : (tensor<4xi64>, tensor<4xi64>) -> tensor<4xi64>
  return
}

// -----

func.func @cross_entropy_labels(%l: tensor<2x8x64xf32>, %y: tensor<2x7xi64>) {
  // expected-error@+2 {{'kiln.cross_entropy' op (fqn 'loss'): labels 'tensor<2x7xi64>' must have the leading shape of logits 'tensor<2x8x64xf32>'}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = kiln.cross_entropy %l, %y {fqn = "loss"} : (tensor<2x8x64xf32>, tensor<2x7xi64>) -> tensor<f32>
  return
}

// -----

func.func @reshape_overflow(%x: tensor<2x8x64xf32>) {
  // A shape whose element count overflows int64 (found by the IR fuzzer).
  // expected-error@+2 {{'kiln.reshape' op (fqn 'layers.0.attention.k_heads'): target shape has more elements than an int64 counts}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = kiln.reshape %x {shape = array<i64: 2, 8, 66666666666666662, 16>, fqn = "layers.0.attention.k_heads"} : (tensor<2x8x64xf32>) -> tensor<2x8x4x16xf32>
  return
}

// -----

func.func @reshape_count(%x: tensor<2x8x64xf32>) {
  // expected-error@+2 {{'kiln.reshape' op (fqn 'layers.0.attention.q_heads'): cannot reshape 'tensor<2x8x64xf32>' (1024 elements) to 960 elements}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = kiln.reshape %x {shape = array<i64: 2, 8, 4, 15>, fqn = "layers.0.attention.q_heads"} : (tensor<2x8x64xf32>) -> tensor<2x8x4x15xf32>
  return
}

// -----

func.func @embedding_backward_shape(%g: tensor<2x8x32xf32>, %ids: tensor<2x7xi64>) {
  // expected-error@+2 {{'kiln.embedding_backward' op (fqn 'tok_embeddings'): grad 'tensor<2x8x32xf32>' must be ids' shape plus the embedding dim, ids 'tensor<2x7xi64>'}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = kiln.embedding_backward %g, %ids {fqn = "tok_embeddings", vocab_size = 64 : i64} : (tensor<2x8x32xf32>, tensor<2x7xi64>) -> tensor<64x32xf32>
  return
}

// -----

func.func @attention_backward_lse(%q: tensor<1x8x4x16xf32>, %k: tensor<1x8x2x16xf32>, %lse: tensor<1x8x4xf32>) {
  // expected-error@+2 {{'kiln.attention_backward' op (fqn 'layers.0.attention.inner_attention'): lse 'tensor<1x8x4xf32>' must be 'tensor<1x4x8xf32>'}}
  // expected-error@+1 {{failed to infer returned types}}
  %0:3 = kiln.attention_backward %q, %q, %k, %k, %q, %lse {causal, scale = 0.25 : f32, fqn = "layers.0.attention.inner_attention"} : (tensor<1x8x4x16xf32>, tensor<1x8x4x16xf32>, tensor<1x8x2x16xf32>, tensor<1x8x2x16xf32>, tensor<1x8x4x16xf32>, tensor<1x8x4xf32>) -> (tensor<1x8x4x16xf32>, tensor<1x8x2x16xf32>, tensor<1x8x2x16xf32>)
  return
}

// -----

func.func @constant_not_float() {
  // expected-error@+1 {{'kiln.constant' op result #0 must be ranked tensor of 32-bit float or bfloat16 type or 16-bit float values, but got 'tensor<i64>'}}
  %0 = kiln.constant {fqn = "loss.seed_grad", value = dense<1> : tensor<i64>} : tensor<i64>
  return
}

// -----

func.func @adamw_moment_type(%p: tensor<32xf32>, %m: tensor<16xf32>, %step: tensor<i64>, %lr: tensor<f32>) {
  // expected-error@+2 {{'kiln.adamw' op (fqn 'optimizer.model.norm.weight'): param 'tensor<32xf32>' and exp_avg 'tensor<16xf32>' must have the same type}}
  // expected-error@+1 {{failed to infer returned types}}
  %0:3 = kiln.adamw %p, %p, %m, %p, %step, %lr, %lr {beta1 = 0.9 : f64, beta2 = 0.95 : f64, eps = 1.0e-8 : f64, weight_decay = 0.1 : f64, fqn = "optimizer.model.norm.weight"} : (tensor<32xf32>, tensor<32xf32>, tensor<16xf32>, tensor<32xf32>, tensor<i64>, tensor<f32>, tensor<f32>) -> (tensor<32xf32>, tensor<32xf32>, tensor<32xf32>)
  return
}

// -----

func.func @adamw_step_type(%p: tensor<32xf32>, %step: tensor<i32>, %lr: tensor<f32>) {
  // expected-error@+1 {{'kiln.adamw' op operand #4 must be 0D tensor of 64-bit signless integer values, but got 'tensor<i32>'}}
  %0:3 = kiln.adamw %p, %p, %p, %p, %step, %lr, %lr {beta1 = 0.9 : f64, beta2 = 0.95 : f64, eps = 1.0e-8 : f64, weight_decay = 0.1 : f64, fqn = "optimizer.w"} : (tensor<32xf32>, tensor<32xf32>, tensor<32xf32>, tensor<32xf32>, tensor<i32>, tensor<f32>, tensor<f32>) -> (tensor<32xf32>, tensor<32xf32>, tensor<32xf32>)
  return
}

// -----

func.func @lr_schedule_decay_type(%step: tensor<i64>) {
  // expected-error@+2 {{expected one of linear, sqrt, cosine, got 'step'}}
  // expected-error@+1 {{failed to parse Kiln_DecayTypeAttr parameter 'value'}}
  %lr = kiln.lr_schedule %step {lr = 3.0e-3 : f64, warmup_steps = 2 : i64, stable_steps = 5 : i64, decay_steps = 10 : i64, decay_type = #kiln.decay_type<step>, min_lr_factor = 0.1 : f64, fqn = "lr_scheduler"} : (tensor<i64>) -> tensor<f32>
  return
}

// -----

func.func @lr_schedule_decay_type_string(%step: tensor<i64>) {
  // expected-error@+1 {{attribute 'decay_type' failed to satisfy constraint}}
  %lr = kiln.lr_schedule %step {lr = 3.0e-3 : f64, warmup_steps = 2 : i64, stable_steps = 5 : i64, decay_steps = 10 : i64, decay_type = "linear", min_lr_factor = 0.1 : f64, fqn = "lr_scheduler"} : (tensor<i64>) -> tensor<f32>
  return
}

// -----

func.func @global_norm_empty() {
  // expected-error@+2 {{'kiln.global_norm' op (fqn 'optimizer.grad_norm'): needs at least one tensor}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = kiln.global_norm {fqn = "optimizer.grad_norm"} : () -> tensor<f32>
  return
}

// -----

func.func @clip_coef_rank(%n: tensor<2xf32>) {
  // expected-error@+2 {{'kiln.clip_coef' op (fqn 'optimizer.clip_grad_norm'): norm must have rank 0, got 'tensor<2xf32>'}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = kiln.clip_coef %n {max_norm = 1.0 : f64, fqn = "optimizer.clip_grad_norm"} : (tensor<2xf32>) -> tensor<f32>
  return
}

// -----
// The kiln.* attributes of functions, arguments, results and ops.

// expected-error@+1 {{argument #1: 'kiln.param' "model.norm.weight" repeats argument #0}}
func.func @param_twice(%a: tensor<4xf32> {kiln.param = "model.norm.weight"},
                       %b: tensor<4xf32> {kiln.param = "model.norm.weight"}) {
  return
}

// -----

// expected-error@+1 {{argument #0: 'kiln.param' must be a non-empty string, got ""}}
func.func @param_empty(%a: tensor<4xf32> {kiln.param = ""}) {
  return
}

// -----

// expected-error@+1 {{argument #0: 'kiln.param' must be a non-empty string, got 3 : i64}}
func.func @param_not_string(%a: tensor<4xf32> {kiln.param = 3}) {
  return
}

// -----

// expected-error@+1 {{argument #0: 'kiln.param' and 'kiln.input' cannot both tag one argument}}
func.func @two_roles(%a: tensor<4xf32> {kiln.param = "w", kiln.input = "input_ids"}) {
  return
}

// -----

// expected-error@+1 {{argument #0: 'kiln.output' is not a kiln attribute of function arguments (known: kiln.param, kiln.input, kiln.state, kiln.grad, kiln.rank)}}
func.func @output_on_argument(%a: tensor<4xf32> {kiln.output = "loss"}) {
  return
}

// -----

// expected-error@+1 {{result #1: 'kiln.output' "loss" repeats result #0}}
func.func @output_twice(%a: tensor<f32> {kiln.input = "x"}) -> (tensor<f32> {kiln.output = "loss"}, tensor<f32> {kiln.output = "loss"}) {
  return %a, %a : tensor<f32>, tensor<f32>
}

// -----

func.func @saved_out_of_range(%x: tensor<2x4xf32>, %y: tensor<2x4xf32>) {
  // expected-error@+1 {{'kiln.saved' = array<i64: -1> must list distinct result indices in [0, 1) in increasing order}}
  %0 = kiln.add %x, %y {fqn = "h", kiln.saved = array<i64: -1>} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @recomputed_not_unit(%x: tensor<2x4xf32>, %y: tensor<2x4xf32>) {
  // expected-error@+1 {{'kiln.recomputed' must be a unit attribute on a kiln op}}
  %0 = kiln.add %x, %y {fqn = "h", kiln.recomputed = 1 : i64} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  return
}

// -----

// A data input repeats once per microbatch (gradient accumulation), never
// twice in one.
func.func @microbatch_inputs(%a: tensor<2xi64> {kiln.input = "input_ids", kiln.microbatch = 0 : i64},
                             %b: tensor<2xi64> {kiln.input = "input_ids", kiln.microbatch = 1 : i64}) {
  return
}

// -----

// expected-error@+1 {{argument #1: 'kiln.input' "input_ids" repeats argument #0}}
func.func @microbatch_twice(%a: tensor<2xi64> {kiln.input = "input_ids", kiln.microbatch = 1 : i64},
                            %b: tensor<2xi64> {kiln.input = "input_ids", kiln.microbatch = 1 : i64}) {
  return
}

// -----

// expected-error@+1 {{argument #0: 'kiln.microbatch' must be an i64 >= 0 on a function argument tagged 'kiln.input'}}
func.func @microbatch_of_param(%a: tensor<2xf32> {kiln.param = "w", kiln.microbatch = 1 : i64}) {
  return
}

// -----

// expected-error@+1 {{argument #0: 'kiln.microbatch' must be an i64 >= 0}}
func.func @microbatch_negative(%a: tensor<2xi64> {kiln.input = "labels", kiln.microbatch = -1 : i64}) {
  return
}

// -----

// A pipeline stage's transfers: one number per argument, one per result;
// the same number may both arrive and leave (a value passing through).
func.func @stage_transfers(%a: tensor<2xf32> {kiln.transfer = 0 : i64},
                           %b: tensor<2xf32> {kiln.transfer = 3 : i64})
    -> (tensor<2xf32> {kiln.transfer = 0 : i64}) attributes {kiln.stage = 1 : i64} {
  return %a : tensor<2xf32>
}

// -----

// expected-error@+1 {{argument #1: 'kiln.transfer' 2 repeats argument #0}}
func.func @transfer_twice(%a: tensor<2xf32> {kiln.transfer = 2 : i64},
                          %b: tensor<2xf32> {kiln.transfer = 2 : i64}) {
  return
}

// -----

// expected-error@+1 {{result #1: 'kiln.cotangent' 0 repeats result #0}}
func.func @cotangent_twice(%a: tensor<2xf32>)
    -> (tensor<2xf32> {kiln.cotangent = 0 : i64}, tensor<2xf32> {kiln.cotangent = 0 : i64}) {
  return %a, %a : tensor<2xf32>, tensor<2xf32>
}

// -----

// expected-error@+1 {{result #0: 'kiln.transfer' must be an i64 >= 0 on a function result}}
func.func @transfer_negative(%a: tensor<2xf32>) -> (tensor<2xf32> {kiln.transfer = -1 : i64}) {
  return %a : tensor<2xf32>
}

// -----

// expected-error@+1 {{'kiln.stage' must be an i64 >= 0 on a function}}
func.func @stage_name(%a: tensor<2xf32>) attributes {kiln.stage = "first"} {
  return
}

// -----

func.func @accumulate_not_add(%x: tensor<2xf32>) {
  // expected-error@+1 {{'kiln.accumulate' must be a unit attribute on a kiln.add}}
  %0 = kiln.scale %x {factor = 2.0 : f64, fqn = "x", kiln.accumulate} : (tensor<2xf32>) -> tensor<2xf32>
  return
}

// -----

func.func @unknown_kiln_attribute(%x: tensor<2x4xf32>, %y: tensor<2x4xf32>) {
  // expected-error@+1 {{unknown kiln attribute 'kiln.savd'}}
  %0 = kiln.add %x, %y {fqn = "h", kiln.savd = array<i64: 0>} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  return
}

// -----

module attributes {kiln.grid_axes = ["dp_replicate", "dp_shard", "tp"]} {
  // expected-error@+1 {{argument #0: 'padded_to' 6 is below dimension 0 of 'tensor<8xf32>'}}
  func.func @padding_too_small(%w: tensor<8xf32> {kiln.param = "w", kiln.sharding = #kiln.sharding<[{"dp_shard"}], padded_to = [6]>}) {
    return
  }
}

// -----

module attributes {kiln.grid_axes = ["dp_replicate", "dp_shard", "tp"]} {
  // expected-error@+1 {{argument #0: unknown grid axis 'pp'}}
  func.func @unknown_axis(%w: tensor<8xf32> {kiln.param = "w", kiln.sharding = #kiln.sharding<[{"pp"}]>}) {
    return
  }
}

// -----

// A declaration has no entry block: its arguments' shardings are checked
// against the function type (this crashed the verifier, found by fuzz/mlir).
module attributes {kiln.grid_axes = ["dp_replicate", "dp_shard", "tp"]} {
  // expected-error@+1 {{argument #1: 'padded_to' 6 is below dimension 0 of 'tensor<8xf32>'}}
  func.func private @declared(tensor<8xf32> {kiln.sharding = #kiln.sharding<[{"dp_shard"}]>},
                              tensor<8xf32> {kiln.sharding = #kiln.sharding<[{"dp_shard"}], padded_to = [6]>})
}

// -----
// The mixture-of-experts ops.

// Routing picks at least one expert...
func.func @router_top_k_zero(%l: tensor<2x8x4xf32>) {
  // expected-error@+2 {{'kiln.router' op (fqn 'layers.0.moe.router'): top_k must be in [1, 4] (the experts), got 0}}
  // expected-error@+1 {{failed to infer returned types}}
  %0:3 = kiln.router %l {top_k = 0 : i64, fqn = "layers.0.moe.router"} : (tensor<2x8x4xf32>) -> (tensor<2x8x0xf32>, tensor<2x8x0xi64>, tensor<2x8x4xf32>)
  return
}

// -----

// ...and no more than there are.
func.func @router_top_k_above_experts(%l: tensor<2x8x4xf32>) {
  // expected-error@+2 {{'kiln.router' op (fqn 'layers.0.moe.router'): top_k must be in [1, 4] (the experts), got 5}}
  // expected-error@+1 {{failed to infer returned types}}
  %0:3 = kiln.router %l {top_k = 5 : i64, fqn = "layers.0.moe.router"} : (tensor<2x8x4xf32>) -> (tensor<2x8x5xf32>, tensor<2x8x5xi64>, tensor<2x8x4xf32>)
  return
}

// -----

// The router's softmax runs in f32: ODS rejects other logits before the shape rule runs.
func.func @router_bf16_logits(%l: tensor<2x8x4xbf16>) {
  // expected-error@+1 {{'kiln.router' op operand #0 must be ranked tensor of 32-bit float values, but got 'tensor<2x8x4xbf16>'}}
  %0:3 = kiln.router %l {top_k = 2 : i64, fqn = "layers.0.moe.router"} : (tensor<2x8x4xbf16>) -> (tensor<2x8x2xbf16>, tensor<2x8x2xi64>, tensor<2x8x4xbf16>)
  return
}

// -----

func.func @grouped_experts_weights_vs_experts(%x: tensor<2x8x32xf32>, %w: tensor<2x8x3xf32>, %ids: tensor<2x8x2xi64>,
                                              %w1: tensor<4x12x32xf32>, %w2: tensor<4x32x12xf32>) {
  // expected-error@+2 {{'kiln.grouped_experts' op (fqn 'layers.0.moe.experts'): weights 'tensor<2x8x3xf32>' and experts 'tensor<2x8x2xi64>' must have the same shape}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = kiln.grouped_experts %x, %w, %ids, %w1, %w1, %w2 {fqn = "layers.0.moe.experts"} : (tensor<2x8x32xf32>, tensor<2x8x3xf32>, tensor<2x8x2xi64>, tensor<4x12x32xf32>, tensor<4x12x32xf32>, tensor<4x32x12xf32>) -> tensor<2x8x32xf32>
  return
}

// -----

func.func @grouped_experts_tokens(%x: tensor<2x8x32xf32>, %w: tensor<2x7x2xf32>, %ids: tensor<2x7x2xi64>,
                                  %w1: tensor<4x12x32xf32>, %w2: tensor<4x32x12xf32>) {
  // expected-error@+2 {{'kiln.grouped_experts' op (fqn 'layers.0.moe.experts'): experts 'tensor<2x7x2xi64>' must have the leading shape of input 'tensor<2x8x32xf32>'}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = kiln.grouped_experts %x, %w, %ids, %w1, %w1, %w2 {fqn = "layers.0.moe.experts"} : (tensor<2x8x32xf32>, tensor<2x7x2xf32>, tensor<2x7x2xi64>, tensor<4x12x32xf32>, tensor<4x12x32xf32>, tensor<4x32x12xf32>) -> tensor<2x8x32xf32>
  return
}

// -----

func.func @grouped_experts_axes_without_count(%x: tensor<2x8x32xf32>, %w: tensor<2x8x2xf32>, %ids: tensor<2x8x2xi64>,
                                              %w1: tensor<2x12x32xf32>, %w2: tensor<2x32x12xf32>) {
  // expected-error@+1 {{'kiln.grouped_experts' op (fqn 'layers.0.moe.experts'): expert_axes and num_experts go together}}
  %0 = kiln.grouped_experts %x, %w, %ids, %w1, %w1, %w2 {fqn = "layers.0.moe.experts", expert_axes = array<i16: 0>} : (tensor<2x8x32xf32>, tensor<2x8x2xf32>, tensor<2x8x2xi64>, tensor<2x12x32xf32>, tensor<2x12x32xf32>, tensor<2x32x12xf32>) -> tensor<2x8x32xf32>
  return
}

// -----

func.func @grouped_experts_count_not_a_multiple(%x: tensor<2x8x32xf32>, %w: tensor<2x8x2xf32>, %ids: tensor<2x8x2xi64>,
                                                %w1: tensor<3x12x32xf32>, %w2: tensor<3x32x12xf32>) {
  // expected-error@+1 {{'kiln.grouped_experts_backward' op (fqn 'layers.0.moe.experts'): num_experts 4 is not a multiple of the 3 experts of the stacks}}
  %0:5 = kiln.grouped_experts_backward %x, %x, %w, %ids, %w1, %w1, %w2 {fqn = "layers.0.moe.experts", expert_axes = array<i16: 0>, num_experts = 4 : i64} : (tensor<2x8x32xf32>, tensor<2x8x32xf32>, tensor<2x8x2xf32>, tensor<2x8x2xi64>, tensor<3x12x32xf32>, tensor<3x12x32xf32>, tensor<3x32x12xf32>) -> (tensor<2x8x32xf32>, tensor<2x8x2xf32>, tensor<3x12x32xf32>, tensor<3x12x32xf32>, tensor<3x32x12xf32>)
  return
}

// -----

func.func @grouped_experts_axis_twice(%x: tensor<2x8x32xf32>, %w: tensor<2x8x2xf32>, %ids: tensor<2x8x2xi64>,
                                      %w1: tensor<1x12x32xf32>, %w2: tensor<1x32x12xf32>) {
  // expected-error@+1 {{'kiln.grouped_experts' op (fqn 'layers.0.moe.experts'): expert_axes names axis 1 twice}}
  %0 = kiln.grouped_experts %x, %w, %ids, %w1, %w1, %w2 {fqn = "layers.0.moe.experts", expert_axes = array<i16: 1, 1>, num_experts = 4 : i64} : (tensor<2x8x32xf32>, tensor<2x8x2xf32>, tensor<2x8x2xi64>, tensor<1x12x32xf32>, tensor<1x12x32xf32>, tensor<1x32x12xf32>) -> tensor<2x8x32xf32>
  return
}

// -----

func.func @grouped_experts_w1_hidden(%x: tensor<2x8x32xf32>, %w: tensor<2x8x2xf32>, %ids: tensor<2x8x2xi64>,
                                     %w1: tensor<4x12x16xf32>, %w2: tensor<4x32x12xf32>) {
  // expected-error@+2 {{'kiln.grouped_experts' op (fqn 'layers.0.moe.experts'): w1 'tensor<4x12x16xf32>' must be [experts, inter, hidden] with hidden 32 (the last dimension of input 'tensor<2x8x32xf32>')}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = kiln.grouped_experts %x, %w, %ids, %w1, %w1, %w2 {fqn = "layers.0.moe.experts"} : (tensor<2x8x32xf32>, tensor<2x8x2xf32>, tensor<2x8x2xi64>, tensor<4x12x16xf32>, tensor<4x12x16xf32>, tensor<4x32x12xf32>) -> tensor<2x8x32xf32>
  return
}

// -----

func.func @grouped_experts_w3(%x: tensor<2x8x32xf32>, %w: tensor<2x8x2xf32>, %ids: tensor<2x8x2xi64>,
                              %w1: tensor<4x12x32xf32>, %w3: tensor<4x8x32xf32>, %w2: tensor<4x32x12xf32>) {
  // expected-error@+2 {{'kiln.grouped_experts' op (fqn 'layers.0.moe.experts'): w3 'tensor<4x8x32xf32>' must have w1's shape 'tensor<4x12x32xf32>'}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = kiln.grouped_experts %x, %w, %ids, %w1, %w3, %w2 {fqn = "layers.0.moe.experts"} : (tensor<2x8x32xf32>, tensor<2x8x2xf32>, tensor<2x8x2xi64>, tensor<4x12x32xf32>, tensor<4x8x32xf32>, tensor<4x32x12xf32>) -> tensor<2x8x32xf32>
  return
}

// -----

// w2 is [experts, hidden, inter]: w1's [experts, inter, hidden] layout is refused.
func.func @grouped_experts_w2(%x: tensor<2x8x32xf32>, %w: tensor<2x8x2xf32>, %ids: tensor<2x8x2xi64>,
                              %w1: tensor<4x12x32xf32>, %w2: tensor<4x12x32xf32>) {
  // expected-error@+2 {{'kiln.grouped_experts' op (fqn 'layers.0.moe.experts'): w2 'tensor<4x12x32xf32>' must be [experts, hidden, inter] = [4, 32, 12]}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = kiln.grouped_experts %x, %w, %ids, %w1, %w1, %w2 {fqn = "layers.0.moe.experts"} : (tensor<2x8x32xf32>, tensor<2x8x2xf32>, tensor<2x8x2xi64>, tensor<4x12x32xf32>, tensor<4x12x32xf32>, tensor<4x12x32xf32>) -> tensor<2x8x32xf32>
  return
}

// -----

func.func @grouped_experts_k_above_experts(%x: tensor<2x8x32xf32>, %w: tensor<2x8x3xf32>, %ids: tensor<2x8x3xi64>,
                                           %w1: tensor<2x12x32xf32>, %w2: tensor<2x32x12xf32>) {
  // expected-error@+2 {{'kiln.grouped_experts' op (fqn 'layers.0.moe.experts'): k = 3 experts per token must be in [1, 2] (the experts)}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = kiln.grouped_experts %x, %w, %ids, %w1, %w1, %w2 {fqn = "layers.0.moe.experts"} : (tensor<2x8x32xf32>, tensor<2x8x3xf32>, tensor<2x8x3xi64>, tensor<2x12x32xf32>, tensor<2x12x32xf32>, tensor<2x32x12xf32>) -> tensor<2x8x32xf32>
  return
}

// -----

// k = 0 routes a token nowhere.
func.func @grouped_experts_k_zero(%x: tensor<2x8x32xf32>, %w: tensor<2x8x0xf32>, %ids: tensor<2x8x0xi64>,
                                  %w1: tensor<2x12x32xf32>, %w2: tensor<2x32x12xf32>) {
  // expected-error@+2 {{'kiln.grouped_experts' op (fqn 'layers.0.moe.experts'): k = 0 experts per token must be in [1, 2] (the experts)}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = kiln.grouped_experts %x, %w, %ids, %w1, %w1, %w2 {fqn = "layers.0.moe.experts"} : (tensor<2x8x32xf32>, tensor<2x8x0xf32>, tensor<2x8x0xi64>, tensor<2x12x32xf32>, tensor<2x12x32xf32>, tensor<2x32x12xf32>) -> tensor<2x8x32xf32>
  return
}

// -----

// An odd operand count would leave the last operand in neither group.
func.func @load_balancing_loss_odd_operands(%p: tensor<2x8x4xf32>, %ids: tensor<2x8x2xi64>, %junk: tensor<7xi32>) {
  // expected-error@+2 {{'kiln.load_balancing_loss' op (fqn 'aux_loss'): needs one probs and one experts operand per sparse layer, got 1 and 2}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = kiln.load_balancing_loss %p, %ids, %junk {fqn = "aux_loss"} : (tensor<2x8x4xf32>, tensor<2x8x2xi64>, tensor<7xi32>) -> tensor<f32>
  return
}

// -----

// The loss needs at least one sparse layer.
func.func @load_balancing_loss_no_layers() {
  // expected-error@+2 {{'kiln.load_balancing_loss' op (fqn 'aux_loss'): needs one probs and one experts operand per sparse layer, got 0 and 0}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = kiln.load_balancing_loss {fqn = "aux_loss"} : () -> tensor<f32>
  return
}

// -----

// Two probs and one experts operand: the operands split evenly, so the
// second probs lands among the experts and ODS rejects its element type.
func.func @load_balancing_loss_count(%p: tensor<2x8x4xf32>, %ids: tensor<2x8x2xi64>) {
  // expected-error@+1 {{'kiln.load_balancing_loss' op operand #1 must be variadic of ranked tensor of 64-bit signless integer or 32-bit signless integer values, but got 'tensor<2x8x4xf32>'}}
  %0 = kiln.load_balancing_loss %p, %p, %ids {fqn = "aux_loss"} : (tensor<2x8x4xf32>, tensor<2x8x4xf32>, tensor<2x8x2xi64>) -> tensor<f32>
  return
}

// -----

func.func @load_balancing_loss_expert_counts(%p0: tensor<2x8x4xf32>, %p1: tensor<2x8x8xf32>, %ids: tensor<2x8x2xi64>) {
  // expected-error@+2 {{'kiln.load_balancing_loss' op (fqn 'aux_loss'): every layer must route over the same 4 experts, got 'tensor<2x8x8xf32>'}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = kiln.load_balancing_loss %p0, %p1, %ids, %ids {fqn = "aux_loss"} : (tensor<2x8x4xf32>, tensor<2x8x8xf32>, tensor<2x8x2xi64>, tensor<2x8x2xi64>) -> tensor<f32>
  return
}

// -----

func.func @load_balancing_loss_tokens(%p: tensor<2x8x4xf32>, %ids: tensor<2x4x2xi64>) {
  // expected-error@+2 {{'kiln.load_balancing_loss' op (fqn 'aux_loss'): experts 'tensor<2x4x2xi64>' must have the leading shape of probs 'tensor<2x8x4xf32>'}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = kiln.load_balancing_loss %p, %ids {fqn = "aux_loss"} : (tensor<2x8x4xf32>, tensor<2x4x2xi64>) -> tensor<f32>
  return
}

// -----

func.func @load_balancing_loss_k(%p: tensor<2x8x4xf32>, %ids: tensor<2x8x5xi64>) {
  // expected-error@+2 {{'kiln.load_balancing_loss' op (fqn 'aux_loss'): top_k must be in [1, 4] (the experts), got 5}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = kiln.load_balancing_loss %p, %ids {fqn = "aux_loss"} : (tensor<2x8x4xf32>, tensor<2x8x5xi64>) -> tensor<f32>
  return
}

// -----

func.func @router_backward_weights_grad(%p: tensor<2x8x4xf32>, %ids: tensor<2x8x2xi64>, %dw: tensor<2x8x4xf32>) {
  // expected-error@+2 {{'kiln.router_backward' op (fqn 'layers.0.moe.router'): weights_grad 'tensor<2x8x4xf32>' must have the shape of experts 'tensor<2x8x2xi64>'}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = kiln.router_backward %p, %ids, %dw, %p {fqn = "layers.0.moe.router"} : (tensor<2x8x4xf32>, tensor<2x8x2xi64>, tensor<2x8x4xf32>, tensor<2x8x4xf32>) -> tensor<2x8x4xf32>
  return
}

// -----

func.func @router_backward_probs_grad(%p: tensor<2x8x4xf32>, %ids: tensor<2x8x2xi64>, %dw: tensor<2x8x2xf32>, %dp: tensor<2x8x2xf32>) {
  // expected-error@+2 {{'kiln.router_backward' op (fqn 'layers.0.moe.router'): probs_grad 'tensor<2x8x2xf32>' must have the type of probs 'tensor<2x8x4xf32>'}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = kiln.router_backward %p, %ids, %dw, %dp {fqn = "layers.0.moe.router"} : (tensor<2x8x4xf32>, tensor<2x8x2xi64>, tensor<2x8x2xf32>, tensor<2x8x2xf32>) -> tensor<2x8x4xf32>
  return
}

// -----

func.func @grouped_experts_backward_result_grad(%dy: tensor<2x8x16xf32>, %x: tensor<2x8x32xf32>, %w: tensor<2x8x2xf32>,
                                                %ids: tensor<2x8x2xi64>, %w1: tensor<4x12x32xf32>, %w2: tensor<4x32x12xf32>) {
  // expected-error@+2 {{'kiln.grouped_experts_backward' op (fqn 'layers.0.moe.experts'): result_grad 'tensor<2x8x16xf32>' and input 'tensor<2x8x32xf32>' must have the same type}}
  // expected-error@+1 {{failed to infer returned types}}
  %0:5 = kiln.grouped_experts_backward %dy, %x, %w, %ids, %w1, %w1, %w2 {fqn = "layers.0.moe.experts"} : (tensor<2x8x16xf32>, tensor<2x8x32xf32>, tensor<2x8x2xf32>, tensor<2x8x2xi64>, tensor<4x12x32xf32>, tensor<4x12x32xf32>, tensor<4x32x12xf32>) -> (tensor<2x8x32xf32>, tensor<2x8x2xf32>, tensor<4x12x32xf32>, tensor<4x12x32xf32>, tensor<4x32x12xf32>)
  return
}

// -----

func.func @load_balancing_loss_backward_num_experts(%g: tensor<f32>, %ids: tensor<2x8x2xi64>) {
  // expected-error@+2 {{'kiln.load_balancing_loss_backward' op (fqn 'aux_loss'): num_experts 1 must be at least k = 2}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = kiln.load_balancing_loss_backward %g, %ids {num_experts = 1 : i64, fqn = "aux_loss"} : (tensor<f32>, tensor<2x8x2xi64>) -> tensor<2x8x1xf32>
  return
}

// -----

func.func @load_balancing_loss_backward_no_layers(%g: tensor<f32>) {
  // expected-error@+2 {{'kiln.load_balancing_loss_backward' op (fqn 'aux_loss'): needs the experts of at least one sparse layer}}
  // expected-error@+1 {{failed to infer returned types}}
  kiln.load_balancing_loss_backward %g {num_experts = 4 : i64, fqn = "aux_loss"} : (tensor<f32>) -> ()
  return
}

// -----

func.func @kernel_unknown(%x: tensor<4x8xf32>, %w: tensor<8xf32>) {
  // expected-error@+1 {{'kiln.kernel' op (fqn 'norm'): unknown kernel 'nki_norm' (registered: chunked_cross_entropy, nki_flash_attention, nki_grouped_experts, nki_rms_norm, nki_rope)}}
  %y = kiln.kernel "nki_norm"(%x, %w) {rule = "r", target = "kiln.rms_norm", options = {eps = 1.0e-6 : f32}, fqn = "norm"}
      : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  return
}

// -----

func.func @kernel_other_target(%x: tensor<4x8xf32>, %w: tensor<8xf32>) {
  // expected-error@+1 {{'kiln.kernel' op (fqn 'norm'): kernel 'nki_rms_norm' replaces 'kiln.rms_norm', not 'kiln.linear'}}
  %y = kiln.kernel "nki_rms_norm"(%x, %w) {rule = "r", target = "kiln.linear", options = {eps = 1.0e-6 : f32}, fqn = "norm"}
      : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  return
}

// -----

func.func @kernel_wrong_result(%x: tensor<4x8xf32>, %w: tensor<8xf32>) {
  // expected-error@+1 {{'kiln.kernel' op (fqn 'norm'): kernel 'nki_rms_norm': result #0 has type 'tensor<4x9xf32>', expected 'tensor<4x8xf32>'}}
  %y = kiln.kernel "nki_rms_norm"(%x, %w) {rule = "r", target = "kiln.rms_norm", options = {eps = 1.0e-6 : f32}, fqn = "norm"}
      : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x9xf32>
  return
}

// -----

// nki_grouped_experts on a block of the experts: its options name the grid
// axes of the split and the layer's experts, together and consistent.
module attributes {kiln.grid_axes = ["dp_replicate", "dp_shard", "ep", "tp"]} {
  func.func @kernel_experts_without_axes(%x: tensor<4x8xf32>, %w: tensor<4x2xf32>, %ids: tensor<4x2xi64>, %w1: tensor<2x6x8xf32>, %w2: tensor<2x8x6xf32>) {
    // expected-error@+1 {{'kiln.kernel' op (fqn 'experts'): kernel 'nki_grouped_experts': expert_axes and num_experts go together}}
    %y = kiln.kernel "nki_grouped_experts"(%x, %w, %ids, %w1, %w1, %w2) {rule = "r", target = "kiln.grouped_experts", options = {num_experts = 4 : i64}, fqn = "experts"}
        : (tensor<4x8xf32>, tensor<4x2xf32>, tensor<4x2xi64>, tensor<2x6x8xf32>, tensor<2x6x8xf32>, tensor<2x8x6xf32>) -> tensor<4x8xf32>
    return
  }
}

// -----

module attributes {kiln.grid_axes = ["dp_replicate", "dp_shard", "ep", "tp"]} {
  func.func @kernel_experts_bad_axis(%x: tensor<4x8xf32>, %w: tensor<4x2xf32>, %ids: tensor<4x2xi64>, %w1: tensor<2x6x8xf32>, %w2: tensor<2x8x6xf32>) {
    // expected-error@+1 {{'kiln.kernel' op (fqn 'experts'): kernel 'nki_grouped_experts': expert_axes entry 4 is not an axis of the grid (4 axes)}}
    %y = kiln.kernel "nki_grouped_experts"(%x, %w, %ids, %w1, %w1, %w2) {rule = "r", target = "kiln.grouped_experts", options = {expert_axes = [4], num_experts = 4 : i64}, fqn = "experts"}
        : (tensor<4x8xf32>, tensor<4x2xf32>, tensor<4x2xi64>, tensor<2x6x8xf32>, tensor<2x6x8xf32>, tensor<2x8x6xf32>) -> tensor<4x8xf32>
    return
  }
}

// -----

module attributes {kiln.grid_axes = ["dp_replicate", "dp_shard", "ep", "tp"]} {
  func.func @kernel_experts_not_multiple(%x: tensor<4x8xf32>, %w: tensor<4x2xf32>, %ids: tensor<4x2xi64>, %w1: tensor<2x6x8xf32>, %w2: tensor<2x8x6xf32>) {
    // expected-error@+1 {{'kiln.kernel' op (fqn 'experts'): kernel 'nki_grouped_experts': num_experts 5 is not a multiple of the 2 experts of the stacks}}
    %y = kiln.kernel "nki_grouped_experts"(%x, %w, %ids, %w1, %w1, %w2) {rule = "r", target = "kiln.grouped_experts", options = {expert_axes = [2], num_experts = 5 : i64}, fqn = "experts"}
        : (tensor<4x8xf32>, tensor<4x2xf32>, tensor<4x2xi64>, tensor<2x6x8xf32>, tensor<2x6x8xf32>, tensor<2x8x6xf32>) -> tensor<4x8xf32>
    return
  }
}

// -----

func.func @kernel_missing_option(%x: tensor<4x8xf32>, %w: tensor<8xf32>) {
  // expected-error@+1 {{'kiln.kernel' op (fqn 'norm'): kernel 'nki_rms_norm': options must hold 'eps' (f32)}}
  %y = kiln.kernel "nki_rms_norm"(%x, %w) {rule = "r", target = "kiln.rms_norm", options = {}, fqn = "norm"}
      : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  return
}

// -----

func.func @kernel_bad_weight(%x: tensor<4x8xf32>, %w: tensor<9xf32>) {
  // expected-error@+1 {{'kiln.kernel' op (fqn 'norm'): kernel 'nki_rms_norm': weight 'tensor<9xf32>' must be [8], the last dimension of x 'tensor<4x8xf32>'}}
  %y = kiln.kernel "nki_rms_norm"(%x, %w) {rule = "r", target = "kiln.rms_norm", options = {eps = 1.0e-6 : f32}, fqn = "norm"}
      : (tensor<4x8xf32>, tensor<9xf32>) -> tensor<4x8xf32>
  return
}

// -----

func.func @transpose_not_a_permutation(%x: tensor<2x3x4xf32>) {
  // expected-error@+2 {{'kiln.transpose' op (fqn 't'): permutation [0, 0, 2] is not a permutation of 0..2}}
  // expected-error@+1 {{failed to infer returned types}}
  %y = kiln.transpose %x {permutation = array<i64: 0, 0, 2>, fqn = "t"} : (tensor<2x3x4xf32>) -> tensor<2x2x4xf32>
  return
}

// -----

func.func @vocab_axes_twice(%t: tensor<32x16xf32>, %ids: tensor<2x8xi64>) {
  // expected-error@+1 {{'kiln.embedding' op (fqn 'tok_embeddings'): vocab_axes names axis 2 twice}}
  %h = kiln.embedding %t, %ids {fqn = "tok_embeddings", vocab_axes = array<i16: 2, 2>}
      : (tensor<32x16xf32>, tensor<2x8xi64>) -> tensor<2x8x16xf32>
  return
}

// -----

module attributes {kiln.grid_axes = ["dp_replicate", "dp_shard", "tp"]} {
  func.func @vocab_axes_outside_grid(%l: tensor<2x8x32xf32>, %m: tensor<2x8xf32>, %y: tensor<2x8xi64>) {
    // expected-error@+1 {{'kiln.vocab_parallel_stats' op (fqn 'loss'): vocab_axes entry 3 is not an axis of the grid (3 axes)}}
    %s = kiln.vocab_parallel_stats %l, %m, %y {fqn = "loss", vocab_axes = array<i16: 3>}
        : (tensor<2x8x32xf32>, tensor<2x8xf32>, tensor<2x8xi64>) -> tensor<2x8x2xf32>
    return
  }
}

// -----

func.func @vocab_stats_labels(%l: tensor<2x8x32xf32>, %m: tensor<2x8xf32>, %y: tensor<2x7xi64>) {
  // expected-error@+2 {{'kiln.vocab_parallel_stats' op (fqn 'loss'): labels 'tensor<2x7xi64>' must have the leading shape of logits 'tensor<2x8x32xf32>'}}
  // expected-error@+1 {{failed to infer returned types}}
  %s = kiln.vocab_parallel_stats %l, %m, %y {fqn = "loss", vocab_axes = array<i16: 2>}
      : (tensor<2x8x32xf32>, tensor<2x8xf32>, tensor<2x7xi64>) -> tensor<2x8x2xf32>
  return
}

// -----

func.func @vocab_loss_stats(%m: tensor<2x8xf32>, %s: tensor<2x8x3xf32>) {
  // expected-error@+2 {{'kiln.vocab_parallel_loss' op (fqn 'loss'): stats 'tensor<2x8x3xf32>' must be max's shape plus a dimension of 2, max 'tensor<2x8xf32>'}}
  // expected-error@+1 {{failed to infer returned types}}
  %loss = kiln.vocab_parallel_loss %m, %s {fqn = "loss"} : (tensor<2x8xf32>, tensor<2x8x3xf32>) -> tensor<f32>
  return
}

// -----

func.func @expert_dispatch_groups(%x: tensor<2x3x8xf32>, %w: tensor<2x3x2xf32>, %ids: tensor<2x3x2xi64>) {
  // expected-error@+2 {{'kiln.expert_dispatch' op (fqn 'layers.0.moe.experts'): groups = 3 must divide num_experts = 4}}
  // expected-error@+1 {{failed to infer returned types}}
  %r:4 = kiln.expert_dispatch %x, %w, %ids {groups = 3 : i64, chunks = 1 : i64, capacity = 6 : i64, num_experts = 4 : i64, fqn = "layers.0.moe.experts"} : (tensor<2x3x8xf32>, tensor<2x3x2xf32>, tensor<2x3x2xi64>) -> (tensor<3x6x8xf32>, tensor<3x6x1xf32>, tensor<3x6x1xi64>, tensor<2x3x2xi64>)
  return
}

// -----

func.func @expert_dispatch_chunks(%x: tensor<2x3x8xf32>, %w: tensor<2x3x2xf32>, %ids: tensor<2x3x2xi64>) {
  // expected-error@+2 {{'kiln.expert_dispatch' op (fqn 'layers.0.moe.experts'): chunks = 4 must be positive and divide the 2 rows of the batch}}
  // expected-error@+1 {{failed to infer returned types}}
  %r:4 = kiln.expert_dispatch %x, %w, %ids {groups = 2 : i64, chunks = 4 : i64, capacity = 6 : i64, num_experts = 4 : i64, fqn = "layers.0.moe.experts"} : (tensor<2x3x8xf32>, tensor<2x3x2xf32>, tensor<2x3x2xi64>) -> (tensor<2x24x8xf32>, tensor<2x24x1xf32>, tensor<2x24x1xi64>, tensor<2x3x2xi64>)
  return
}

// -----

func.func @expert_combine_buffer(%slots: tensor<2x3x2xi64>, %rows: tensor<2x9x8xf32>) {
  // expected-error@+2 {{'kiln.expert_combine' op (fqn 'layers.0.moe.experts'): rows 'tensor<2x9x8xf32>' must be [groups, chunks * capacity, hidden] with chunks = 2}}
  // expected-error@+1 {{failed to infer returned types}}
  %y = kiln.expert_combine %slots, %rows {chunks = 2 : i64, fqn = "layers.0.moe.experts"} : (tensor<2x3x2xi64>, tensor<2x9x8xf32>) -> tensor<2x3x8xf32>
  return
}

// -----

func.func @expert_dispatch_backward_row_weights(%slots: tensor<2x3x2xi64>, %rows: tensor<2x12x8xf32>, %rw: tensor<2x12x2xf32>) {
  // expected-error@+2 {{'kiln.expert_dispatch_backward' op (fqn 'layers.0.moe.experts'): row_weights_grad 'tensor<2x12x2xf32>' must be rows_grad's shape 'tensor<2x12x8xf32>' with a last dimension of 1}}
  // expected-error@+1 {{failed to infer returned types}}
  %dx, %dw = kiln.expert_dispatch_backward %slots, %rows, %rw {chunks = 2 : i64, fqn = "layers.0.moe.experts"} : (tensor<2x3x2xi64>, tensor<2x12x8xf32>, tensor<2x12x2xf32>) -> (tensor<2x3x8xf32>, tensor<2x3x2xf32>)
  return
}

// -----

func.func @grouped_experts_blocked(%x: tensor<3x4x8xf32>, %w: tensor<3x4x1xf32>, %ids: tensor<3x4x1xi64>,
                                   %w1: tensor<4x6x8xf32>, %w2: tensor<4x8x6xf32>) {
  // expected-error@+2 {{'kiln.grouped_experts' op (fqn 'layers.0.moe.experts'): a blocked input 'tensor<3x4x8xf32>' must be [blocks, ..., hidden] with blocks dividing the 4 experts of the stacks}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = kiln.grouped_experts %x, %w, %ids, %w1, %w1, %w2 {blocked, fqn = "layers.0.moe.experts"} : (tensor<3x4x8xf32>, tensor<3x4x1xf32>, tensor<3x4x1xi64>, tensor<4x6x8xf32>, tensor<4x6x8xf32>, tensor<4x8x6xf32>) -> tensor<3x4x8xf32>
  return
}

// -----

// The state a step updates: one entry per result, each an argument or -1.
// expected-error@+1 {{'kiln.input_output_alias' has 1 entries for 2 results and 1 arguments}}
func.func @alias_per_result(%w: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>)
    attributes {kiln.input_output_alias = array<i64: 0>} {
  return %w, %w : tensor<4xf32>, tensor<4xf32>
}

// -----

// expected-error@+1 {{'kiln.out_param_buffers' names argument 2 of 2}}
func.func @out_param_buffers_range(%w: memref<4xf32>, %out: memref<4xf32>)
    attributes {kiln.out_param_buffers = array<i64: 2>} {
  return
}

// -----

// expected-error@+1 {{'kiln.input_output_alias' must be an array<i64> on a function}}
func.func @alias_type(%w: tensor<4xf32>) -> tensor<4xf32> attributes {kiln.input_output_alias = [0]} {
  return %w : tensor<4xf32>
}
