// no-int64: an s64 rank (and what is computed from it); neuronx-cc
// computes in 32 bits.
// RUN: rm -rf %t && mkdir -p %t && cp %S/Inputs/manifest.json %t/
// RUN: kiln-translate --hlo-to-proto %s -o %t/model.hlo.pb
// RUN: not kiln check-hlo --neuron %t | FileCheck %s
// CHECK: FAIL rank-parameter   parameter 1 ('rank') must be an s32[] or u32[] scalar
// CHECK: FAIL no-int64         p1.{{[0-9]+}} (rank) is s64
// CHECK: FAIL no-int64         convert.{{[0-9]+}} is s64
// CHECK: 2 of 8 rules broken

module {
  func.func @train_step(%w: tensor<4x8xf32> {kiln.param = "w"}, %rank: tensor<i64> {kiln.rank = "rank"})
      -> (tensor<4x8xf32> {kiln.param = "w"}, tensor<8x8xf32> {kiln.output = "gathered"}) {
    %twice = hlo.add %rank, %rank : (tensor<i64>, tensor<i64>) -> tensor<i64>
    %w2 = hlo.convert %w : (tensor<4x8xf32>) -> tensor<4x8xi64>
    %back = hlo.convert %w2 : (tensor<4x8xi64>) -> tensor<4x8xf32>
    %g = hlo.all_gather %back {all_gather_dim = 0 : i64, replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>} : (tensor<4x8xf32>) -> tensor<8x8xf32>
    return %w, %g : tensor<4x8xf32>, tensor<8x8xf32>
  }
}
