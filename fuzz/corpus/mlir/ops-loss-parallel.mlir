module {
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
}
