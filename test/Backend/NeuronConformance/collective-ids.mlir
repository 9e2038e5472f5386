// collective-ids: XLA's flattened-id form (a channel id and
// use_global_device_ids) where the proven emitters write cross-replica
// collectives, and groups that leave a rank out.
// RUN: rm -rf %t && mkdir -p %t && cp %S/Inputs/manifest.json %t/
// RUN: kiln-translate --hlo-to-proto %s -o %t/model.hlo.pb
// RUN: not kiln check-hlo --neuron %t | FileCheck %s
// CHECK: ok   rank-parameter
// CHECK: FAIL collective-ids   all-gather.{{[0-9]+}} has channel_id=1: cross-replica collectives take none
// CHECK: FAIL collective-ids   all-gather.{{[0-9]+}} has use_global_device_ids (flattened ids)
// CHECK: FAIL collective-ids   all-reduce.{{[0-9]+}} groups cover 1 of the 2 ranks
// CHECK: ok   integer-scatter
// CHECK: 1 of 8 rules broken

module {
  func.func @train_step(%w: tensor<4x8xf32> {kiln.param = "w"}, %rank: tensor<i32> {kiln.rank = "rank"})
      -> (tensor<4x8xf32> {kiln.param = "w"}, tensor<8x8xf32> {kiln.output = "gathered"}) {
    %g = hlo.all_gather %w {all_gather_dim = 0 : i64, channel_id = 1 : i64, replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>, use_global_device_ids} : (tensor<4x8xf32>) -> tensor<8x8xf32>
    %s = hlo.all_reduce %w {combiner = #hlo<combiner add>, replica_groups = dense<[[1]]> : tensor<1x1xi64>} : (tensor<4x8xf32>) -> tensor<4x8xf32>
    return %s, %g : tensor<4x8xf32>, tensor<8x8xf32>
  }
}
