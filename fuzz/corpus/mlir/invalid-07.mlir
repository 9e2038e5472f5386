func.func @embedding_table_rank(%t: tensor<64xf32>, %ids: tensor<2x8xi64>) {
  %0 = kiln.embedding %t, %ids {fqn = "tok_embeddings"} : (tensor<64xf32>, tensor<2x8xi64>) -> tensor<2x8x32xf32>
  return
}
