module {
  func.func @loss(%q: tensor<1x2x1x4xf32> {kiln.param = "q"},
                  %labels: tensor<1x1xi64> {kiln.input = "labels"}) -> tensor<f32> {
    %o, %lse = kiln.attention %q, %q, %q {causal, scale = 0.5 : f32, fqn = "attn"} : (tensor<1x2x1x4xf32>, tensor<1x2x1x4xf32>, tensor<1x2x1x4xf32>) -> (tensor<1x2x1x4xf32>, tensor<1x1x2xf32>)
    %n = kiln.cross_entropy %lse, %labels {fqn = "loss"} : (tensor<1x1x2xf32>, tensor<1x1xi64>) -> tensor<f32>
    return %n : tensor<f32>
  }
}
