module attributes {kiln.grid_axes = ["dp_replicate", "dp_shard", "tp"]} {
  func.func @unknown_axis(%w: tensor<8xf32> {kiln.param = "w", kiln.sharding = #kiln.sharding<[{"pp"}]>}) {
    return
  }
}
