func.func @grouped_experts_k_zero(%x: tensor<2x8x32xf32>, %w: tensor<2x8x0xf32>, %ids: tensor<2x8x0xi64>,
                                  %w1: tensor<2x12x32xf32>, %w2: tensor<2x32x12xf32>) {
  %0 = kiln.grouped_experts %x, %w, %ids, %w1, %w1, %w2 {fqn = "layers.0.moe.experts"} : (tensor<2x8x32xf32>, tensor<2x8x0xf32>, tensor<2x8x0xi64>, tensor<2x12x32xf32>, tensor<2x12x32xf32>, tensor<2x32x12xf32>) -> tensor<2x8x32xf32>
  return
}
