func.func @grouped_experts_w3(%x: tensor<2x8x32xf32>, %w: tensor<2x8x2xf32>, %ids: tensor<2x8x2xi64>,
                              %w1: tensor<4x12x32xf32>, %w3: tensor<4x8x32xf32>, %w2: tensor<4x32x12xf32>) {
  %0 = kiln.grouped_experts %x, %w, %ids, %w1, %w3, %w2 {fqn = "layers.0.moe.experts"} : (tensor<2x8x32xf32>, tensor<2x8x2xf32>, tensor<2x8x2xi64>, tensor<4x12x32xf32>, tensor<4x8x32xf32>, tensor<4x32x12xf32>) -> tensor<2x8x32xf32>
  return
}
