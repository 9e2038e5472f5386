module {
  func.func @loss(%x: tensor<1x2x8xf32> {kiln.input = "input_ids"},
                  %labels: tensor<1x2xi64> {kiln.input = "labels"},
                  %gate: tensor<4x8xf32> {kiln.param = "gate"},
                  %w1: tensor<4x6x8xf32> {kiln.param = "w1"},
                  %w3: tensor<4x6x8xf32> {kiln.param = "w3"},
                  %w2: tensor<4x8x6xf32> {kiln.param = "w2"})
      -> (tensor<f32>, tensor<f32> {kiln.output = "aux_loss"}) {
    %logits = kiln.linear %x, %gate {fqn = "layers.0.moe.router.gate"} : (tensor<1x2x8xf32>, tensor<4x8xf32>) -> tensor<1x2x4xf32>
    %w, %ids, %p = kiln.router %logits {fqn = "layers.0.moe.router", norm_topk_prob, top_k = 2 : i64}
        : (tensor<1x2x4xf32>) -> (tensor<1x2x2xf32>, tensor<1x2x2xi64>, tensor<1x2x4xf32>)
    %y = kiln.grouped_experts %x, %w, %ids, %w1, %w3, %w2 {fqn = "layers.0.moe.experts"}
        : (tensor<1x2x8xf32>, tensor<1x2x2xf32>, tensor<1x2x2xi64>, tensor<4x6x8xf32>, tensor<4x6x8xf32>, tensor<4x8x6xf32>) -> tensor<1x2x8xf32>
    %sq = kiln.cross_entropy %y, %labels {fqn = "loss"} : (tensor<1x2x8xf32>, tensor<1x2xi64>) -> tensor<f32>
    %aux = kiln.load_balancing_loss %p, %ids {fqn = "aux_loss"} : (tensor<1x2x4xf32>, tensor<1x2x2xi64>) -> tensor<f32>
    %scaled = kiln.scale %aux {factor = 1.0e-2 : f64, fqn = "aux_loss.scaled"} : (tensor<f32>) -> tensor<f32>
    %total = kiln.add %sq, %scaled {fqn = "loss.with_aux"} : (tensor<f32>, tensor<f32>) -> tensor<f32>
    return %total, %aux : tensor<f32>, tensor<f32>
  }
}
