func.func @embedding_float_ids(%t: tensor<64x32xf32>, %ids: tensor<2x8xf32>) {
  %0 = kiln.embedding %t, %ids {fqn = "tok_embeddings"} : (tensor<64x32xf32>, tensor<2x8xf32>) -> tensor<2x8x32xf32>
  return
}
