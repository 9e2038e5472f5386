// communicators: two distinct replica-group lists for a runtime that allows
// one per NEFF (the manifest's target.neuron_max_communicators).
// RUN: rm -rf %t && mkdir -p %t
// RUN: sed 's/"neuron_max_communicators": 16/"neuron_max_communicators": 1/' %S/Inputs/manifest.json > %t/manifest.json
// RUN: kiln-translate --hlo-to-proto %s -o %t/model.hlo.pb
// RUN: not kiln check-hlo --neuron %t | FileCheck %s
// CHECK: (2 ranks, up to 1 communicators per NEFF)
// CHECK: FAIL communicators    2 distinct replica-group lists, over the runtime's 1 per NEFF (target.neuron_max_communicators)
// CHECK: 1 of 8 rules broken

module {
  func.func @train_step(%w: tensor<4x8xf32> {kiln.param = "w"}, %rank: tensor<i32> {kiln.rank = "rank"})
      -> (tensor<4x8xf32> {kiln.param = "w"}, tensor<8x8xf32> {kiln.output = "gathered"}) {
    %g = hlo.all_gather %w {all_gather_dim = 0 : i64, replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>} : (tensor<4x8xf32>) -> tensor<8x8xf32>
    %s = hlo.all_reduce %w {combiner = #hlo<combiner add>, replica_groups = dense<[[1, 0]]> : tensor<1x2xi64>} : (tensor<4x8xf32>) -> tensor<4x8xf32>
    return %s, %g : tensor<4x8xf32>, tensor<8x8xf32>
  }
}
