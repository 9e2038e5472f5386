func.func @grouped_experts_backward_result_grad(%dy: tensor<2x8x16xf32>, %x: tensor<2x8x32xf32>, %w: tensor<2x8x2xf32>,
                                                %ids: tensor<2x8x2xi64>, %w1: tensor<4x12x32xf32>, %w2: tensor<4x32x12xf32>) {
  %0:5 = kiln.grouped_experts_backward %dy, %x, %w, %ids, %w1, %w1, %w2 {fqn = "layers.0.moe.experts"} : (tensor<2x8x16xf32>, tensor<2x8x32xf32>, tensor<2x8x2xf32>, tensor<2x8x2xi64>, tensor<4x12x32xf32>, tensor<4x12x32xf32>, tensor<4x32x12xf32>) -> (tensor<2x8x32xf32>, tensor<2x8x2xf32>, tensor<4x12x32xf32>, tensor<4x12x32xf32>, tensor<4x32x12xf32>)
  return
}
