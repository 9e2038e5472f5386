// #kiln.sharding: parsed, printed, parsed again, on arguments, results and
// ops' kiln.shardings; then what its parser, its verifier and the dialect's
// checks against the value and the grid refuse.
// RUN: kiln-opt %s --split-input-file | kiln-opt --split-input-file | FileCheck %s
// RUN: kiln-opt %S/Inputs/sharding-invalid.mlir --split-input-file --verify-diagnostics

module attributes {kiln.grid_axes = ["dp_replicate", "dp_shard", "tp"]} {
  // CHECK-LABEL: func.func @split
  // CHECK-SAME: %{{.*}}: tensor<8x4xf32> {kiln.sharding = #kiln.sharding<[{"tp", "dp_shard"}, {}], padded_to = [9, 0]>}
  // CHECK-SAME: %{{.*}}: tensor<i64> {kiln.sharding = #kiln.sharding<[]>}
  // CHECK-SAME: -> (tensor<8x4xf32> {kiln.sharding = #kiln.sharding<[{}, {"dp_replicate"}], partial = {"tp", "dp_shard"}>})
  func.func @split(%w: tensor<8x4xf32> {kiln.sharding = #kiln.sharding<[{"tp", "dp_shard"}, {}], padded_to = [9, 0]>},
                   %s: tensor<i64> {kiln.sharding = #kiln.sharding<[]>})
      -> (tensor<8x4xf32> {kiln.sharding = #kiln.sharding<[{}, {"dp_replicate"}], partial = {"tp", "dp_shard"}>}) {
    // CHECK: kiln.add {{.*}}kiln.shardings = [#kiln.sharding<[{"dp_shard"}, {}]>]
    %0 = kiln.add %w, %w {fqn = "h", kiln.shardings = [#kiln.sharding<[{"dp_shard"}, {}]>]} : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<8x4xf32>
    return %0 : tensor<8x4xf32>
  }
}
