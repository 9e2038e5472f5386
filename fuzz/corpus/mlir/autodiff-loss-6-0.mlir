module {
  func.func @loss(%ids: tensor<1x2xi64> {kiln.input = "input_ids"},
                  %labels: tensor<1x2xi64> {kiln.input = "labels"},
                  %table: tensor<8x4xf32> {kiln.param = "table"}) -> tensor<f32> {
    %h = kiln.embedding %table, %ids {fqn = "tok_embeddings"} : (tensor<8x4xf32>, tensor<1x2xi64>) -> tensor<1x2x4xf32>
    %c = kiln.constant {fqn = "bias", value = dense<0.5> : tensor<1x2x4xf32>} : tensor<1x2x4xf32>
    %b = kiln.add %h, %c {fqn = "biased"} : (tensor<1x2x4xf32>, tensor<1x2x4xf32>) -> tensor<1x2x4xf32>
    %logits = kiln.linear %b, %table {fqn = "output"} : (tensor<1x2x4xf32>, tensor<8x4xf32>) -> tensor<1x2x8xf32>
    %loss = kiln.cross_entropy %logits, %labels {fqn = "loss"} : (tensor<1x2x8xf32>, tensor<1x2xi64>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}
