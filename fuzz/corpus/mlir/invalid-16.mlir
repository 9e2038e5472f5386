func.func @rope_cache_odd() {
  %0 = kiln.rope_cache {theta = 1.0e6 : f64, seq_len = 8 : i64, head_dim = 15 : i64, fqn = "rope_cache"} : tensor<8x30xf32>
  return
}
