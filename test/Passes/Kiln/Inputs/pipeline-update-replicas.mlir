// Two stages' backwards (as kiln-stage-forward-backward leaves them, bodies
// reduced to their gradients) on a grid of 2 pipeline ranks x 2 replicas.
module attributes {kiln.grid_axes = ["pp", "dp_replicate"]} {
  shard.grid @grid(shape = 2x2)
  func.func @loss_stage0_backward(%c: tensor<4x4xf32> {kiln.cotangent = 0 : i64})
      -> (tensor<4x4xf32> {kiln.grad = "model.layers.0.mlp.down_proj.weight"})
      attributes {kiln.stage = 0 : i64} {
    return %c : tensor<4x4xf32>
  }
  func.func @loss_stage1_backward(%g: tensor<4xf32> {kiln.residual = 0 : i64})
      -> (tensor<4xf32> {kiln.grad = "model.norm.weight"})
      attributes {kiln.stage = 1 : i64} {
    return %g : tensor<4xf32>
  }
}
