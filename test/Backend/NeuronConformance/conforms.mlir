// The module every rule file breaks one way: 2 ranks, the rank a parameter,
// a cross-replica all-gather, names on every tensor. It conforms.
// RUN: rm -rf %t && mkdir -p %t && cp %S/Inputs/manifest.json %t/
// RUN: kiln-translate --hlo-to-proto %s -o %t/model.hlo.pb
// RUN: kiln check-hlo --neuron %t | FileCheck %s
// CHECK: Neuron conformance of {{.*}}model.hlo.pb (2 ranks, up to 16 communicators per NEFF):
// CHECK-COUNT-8: ok
// CHECK-NEXT: conforms: all 8 rules hold

module {
  func.func @train_step(%w: tensor<4x8xf32> {kiln.param = "w"}, %rank: tensor<i32> {kiln.rank = "rank"})
      -> (tensor<4x8xf32> {kiln.param = "w"}, tensor<8x8xf32> {kiln.output = "gathered"}) {
    %g = hlo.all_gather %w {all_gather_dim = 0 : i64, replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>} : (tensor<4x8xf32>) -> tensor<8x8xf32>
    return %w, %g : tensor<4x8xf32>, tensor<8x8xf32>
  }
}
