func.func @router_top_k_zero(%l: tensor<2x8x4xf32>) {
  %0:3 = kiln.router %l {top_k = 0 : i64, fqn = "layers.0.moe.router"} : (tensor<2x8x4xf32>) -> (tensor<2x8x0xf32>, tensor<2x8x0xi64>, tensor<2x8x4xf32>)
  return
}
