// rank-parameter: the rank read with replica-id instead of the 'rank'
// parameter (NxD: ReplicaID is not supported yet).
// RUN: rm -rf %t && mkdir -p %t && cp %S/Inputs/manifest.json %t/
// RUN: kiln-translate --hlo-to-proto %s -o %t/model.hlo.pb
// RUN: not kiln check-hlo --neuron %t | FileCheck %s
// CHECK: FAIL rank-parameter   expected one entry parameter named 'rank', found 0
// CHECK: FAIL rank-parameter   replica-id.{{[0-9]+}} is a replica-id instruction: pass the rank as a parameter
// CHECK: ok   collective-ids
// CHECK: FAIL manifest-names   parameter 1 is 'rank' in the manifest but 'r' in the module
// CHECK: 2 of 8 rules broken

module {
  func.func @train_step(%w: tensor<4x8xf32> {kiln.param = "w"}, %r: tensor<i32> {kiln.input = "r"})
      -> (tensor<4x8xf32> {kiln.param = "w"}, tensor<8x8xf32> {kiln.output = "gathered"}) {
    %id = hlo.replica_id : tensor<ui32>
    %g = hlo.all_gather %w {all_gather_dim = 0 : i64, replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>} : (tensor<4x8xf32>) -> tensor<8x8xf32>
    return %w, %g : tensor<4x8xf32>, tensor<8x8xf32>
  }
}
