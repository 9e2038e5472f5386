func.func @embedding_backward_shape(%g: tensor<2x8x32xf32>, %ids: tensor<2x7xi64>) {
  %0 = kiln.embedding_backward %g, %ids {fqn = "tok_embeddings", vocab_size = 64 : i64} : (tensor<2x8x32xf32>, tensor<2x7xi64>) -> tensor<64x32xf32>
  return
}
