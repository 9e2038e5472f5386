func.func @bf16(%table: tensor<64x32xbf16>, %ids: tensor<4xi32>) -> tensor<4x32xbf16> {
  %e = kiln.embedding %table, %ids {fqn = "tok_embeddings"} : (tensor<64x32xbf16>, tensor<4xi32>) -> tensor<4x32xbf16>
  return %e : tensor<4x32xbf16>
}
