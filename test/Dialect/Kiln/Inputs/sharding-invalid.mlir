// Errors of #kiln.sharding (test/Dialect/Kiln/sharding.mlir runs this).

module attributes {kiln.grid_axes = ["dp_replicate", "dp_shard", "tp"]} {
  // expected-error@+1 {{#kiln.sharding: grid axis 'tp' is used twice}}
  func.func @twice(%w: tensor<8x4xf32> {kiln.sharding = #kiln.sharding<[{"tp"}, {}], partial = {"tp"}>}) {
    return
  }
}

// -----

module attributes {kiln.grid_axes = ["dp_replicate", "dp_shard", "tp"]} {
  // expected-error@+1 {{#kiln.sharding: padded_to lists 1 sizes for 2 dimensions}}
  func.func @padded_rank(%w: tensor<8x4xf32> {kiln.sharding = #kiln.sharding<[{"tp"}, {}], padded_to = [9]>}) {
    return
  }
}

// -----

module attributes {kiln.grid_axes = ["dp_replicate", "dp_shard", "tp"]} {
  // expected-error@+1 {{#kiln.sharding: padded_to sizes must be >= 0}}
  func.func @padded_negative(%w: tensor<8xf32> {kiln.sharding = #kiln.sharding<[{"tp"}], padded_to = [-1]>}) {
    return
  }
}

// -----

module attributes {kiln.grid_axes = ["dp_replicate", "dp_shard", "tp"]} {
  // expected-error@+1 {{#kiln.sharding: expected 'partial' or 'padded_to', got 'pending'}}
  func.func @unknown_key(%w: tensor<8xf32> {kiln.sharding = #kiln.sharding<[{"tp"}], pending = {"tp"}>}) {
    return
  }
}

// -----

module attributes {kiln.grid_axes = ["dp_replicate", "dp_shard", "tp"]} {
  // expected-error@+1 {{argument #0: #kiln.sharding<[{"tp"}]> lists 1 dimensions, the value has 2}}
  func.func @rank(%w: tensor<8x4xf32> {kiln.sharding = #kiln.sharding<[{"tp"}]>}) {
    return
  }
}

// -----

// The dictionary form of earlier releases is refused, naming the new one.
module attributes {kiln.grid_axes = ["dp_replicate", "dp_shard", "tp"]} {
  // expected-error@+1 {{argument #0: a sharding must be a #kiln.sharding<...>, got}}
  func.func @dictionary(%w: tensor<8xf32> {kiln.sharding = {dims = [["tp"]]}}) {
    return
  }
}

// -----

module attributes {kiln.grid_axes = ["dp_replicate", "dp_shard", "tp"]} {
  func.func @result(%x: tensor<8x4xf32>) -> tensor<8x4xf32> {
    // expected-error@+1 {{result #0: unknown grid axis 'ep' (the grid's: dp_replicate, dp_shard, tp)}}
    %0 = kiln.add %x, %x {fqn = "h", kiln.shardings = [#kiln.sharding<[{"ep"}, {}]>]} : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<8x4xf32>
    return %0 : tensor<8x4xf32>
  }
}

// -----

module attributes {kiln.grid_axes = ["dp_replicate", "dp_shard", "tp"]} {
  // expected-error@+1 {{#kiln.sharding: 'partial' is given twice}}
  func.func @key_twice(%w: tensor<8xf32> {kiln.sharding = #kiln.sharding<[{}], partial = {"tp"}, partial = {"dp_shard"}>}) {
    return
  }
}
