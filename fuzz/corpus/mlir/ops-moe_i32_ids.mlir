func.func @moe_i32_ids(%x: tensor<6x16xbf16>, %w: tensor<6x2xf32>, %ids: tensor<6x2xi32>,
                       %w1: tensor<3x8x16xbf16>, %w3: tensor<3x8x16xbf16>, %w2: tensor<3x16x8xbf16>)
    -> tensor<6x16xbf16> {
  %y = kiln.grouped_experts %x, %w, %ids, %w1, %w3, %w2 {fqn = "layers.3.moe.experts"} : (tensor<6x16xbf16>, tensor<6x2xf32>, tensor<6x2xi32>, tensor<3x8x16xbf16>, tensor<3x8x16xbf16>, tensor<3x16x8xbf16>) -> tensor<6x16xbf16>
  return %y : tensor<6x16xbf16>
}
