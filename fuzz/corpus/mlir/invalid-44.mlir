func.func @router_top_k_above_experts(%l: tensor<2x8x4xf32>) {
  %0:3 = kiln.router %l {top_k = 5 : i64, fqn = "layers.0.moe.router"} : (tensor<2x8x4xf32>) -> (tensor<2x8x5xf32>, tensor<2x8x5xi64>, tensor<2x8x4xf32>)
  return
}
