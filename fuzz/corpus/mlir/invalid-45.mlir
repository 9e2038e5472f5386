func.func @router_bf16_logits(%l: tensor<2x8x4xbf16>) {
  %0:3 = kiln.router %l {top_k = 2 : i64, fqn = "layers.0.moe.router"} : (tensor<2x8x4xbf16>) -> (tensor<2x8x2xbf16>, tensor<2x8x2xi64>, tensor<2x8x4xbf16>)
  return
}
