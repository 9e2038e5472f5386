module attributes {kiln.grid_axes = ["dp_replicate", "dp_shard", "tp"]} {
  func.func @padding_too_small(%w: tensor<8xf32> {kiln.param = "w", kiln.sharding = #kiln.sharding<[{"dp_shard"}], padded_to = [6]>}) {
    return
  }
}
