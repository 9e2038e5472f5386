module attributes {kiln.grid_axes = ["dp_replicate", "dp_shard", "tp"]} {
  func.func @padding_too_small(%w: tensor<8xf32> {kiln.param = "w", kiln.sharding = {dims = [["dp_shard"]], padded_to = array<i64: 6>}}) {
    return
  }
}
