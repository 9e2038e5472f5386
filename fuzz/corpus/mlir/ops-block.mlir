func.func @block(%ids: tensor<2x8xi64>, %labels: tensor<2x8xi64>, %table: tensor<64x32xf32>,
                 %norm: tensor<32xf32>, %wq: tensor<64x32xf32>, %wk: tensor<32x32xf32>,
                 %wv: tensor<32x32xf32>, %qn: tensor<16xf32>, %w1: tensor<48x32xf32>)
    -> tensor<f32> {
  %h = kiln.embedding %table, %ids {fqn = "tok_embeddings"} : (tensor<64x32xf32>, tensor<2x8xi64>) -> tensor<2x8x32xf32>
  %x = kiln.rms_norm %h, %norm {eps = 1.0e-6 : f32, fqn = "layers.0.attention_norm"} : (tensor<2x8x32xf32>, tensor<32xf32>) -> tensor<2x8x32xf32>
  %q = kiln.linear %x, %wq {fqn = "layers.0.attention.wq"} : (tensor<2x8x32xf32>, tensor<64x32xf32>) -> tensor<2x8x64xf32>
  %k = kiln.linear %x, %wk {fqn = "layers.0.attention.wk"} : (tensor<2x8x32xf32>, tensor<32x32xf32>) -> tensor<2x8x32xf32>
  %v = kiln.linear %x, %wv {fqn = "layers.0.attention.wv"} : (tensor<2x8x32xf32>, tensor<32x32xf32>) -> tensor<2x8x32xf32>
  %q4 = kiln.reshape %q {shape = array<i64: 2, 8, 4, 16>, fqn = "layers.0.attention.q_heads"} : (tensor<2x8x64xf32>) -> tensor<2x8x4x16xf32>
  %k4 = kiln.reshape %k {shape = array<i64: 2, 8, 2, 16>, fqn = "layers.0.attention.k_heads"} : (tensor<2x8x32xf32>) -> tensor<2x8x2x16xf32>
  %v4 = kiln.reshape %v {shape = array<i64: 2, 8, 2, 16>, fqn = "layers.0.attention.v_heads"} : (tensor<2x8x32xf32>) -> tensor<2x8x2x16xf32>
  %qnn = kiln.rms_norm %q4, %qn {eps = 1.0e-6 : f32, fqn = "layers.0.attention.q_norm"} : (tensor<2x8x4x16xf32>, tensor<16xf32>) -> tensor<2x8x4x16xf32>
  %cache = kiln.rope_cache {theta = 1.0e6 : f64, seq_len = 8 : i64, head_dim = 16 : i64, fqn = "rope_cache"} : tensor<8x32xf32>
  %qr, %kr = kiln.rope %qnn, %k4, %cache {fqn = "layers.0.attention.rope"} : (tensor<2x8x4x16xf32>, tensor<2x8x2x16xf32>, tensor<8x32xf32>) -> (tensor<2x8x4x16xf32>, tensor<2x8x2x16xf32>)
  %o, %lse = kiln.attention %qr, %kr, %v4 {causal, scale = 0.25 : f32, fqn = "layers.0.attention.inner_attention"} : (tensor<2x8x4x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x2x16xf32>) -> (tensor<2x8x4x16xf32>, tensor<2x4x8xf32>)
  %o3 = kiln.reshape %o {shape = array<i64: 2, 8, 64>, fqn = "layers.0.attention.merge_heads"} : (tensor<2x8x4x16xf32>) -> tensor<2x8x64xf32>
  %g = kiln.linear %h, %w1 {fqn = "layers.0.feed_forward.w1"} : (tensor<2x8x32xf32>, tensor<48x32xf32>) -> tensor<2x8x48xf32>
  %s = kiln.swiglu %g, %g {fqn = "layers.0.feed_forward.act"} : (tensor<2x8x48xf32>, tensor<2x8x48xf32>) -> tensor<2x8x48xf32>
  %r = kiln.add %h, %x {fqn = "layers.0.attention_residual"} : (tensor<2x8x32xf32>, tensor<2x8x32xf32>) -> tensor<2x8x32xf32>
  %logits = kiln.linear %r, %table {fqn = "output"} : (tensor<2x8x32xf32>, tensor<64x32xf32>) -> tensor<2x8x64xf32>
  %loss = kiln.cross_entropy %logits, %labels {fqn = "loss"} : (tensor<2x8x64xf32>, tensor<2x8xi64>) -> tensor<f32>
  return %loss : tensor<f32>
}
