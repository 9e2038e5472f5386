// neff-names: a parameter and a result without a name give the runtime
// nothing to bind them by.
// RUN: rm -rf %t && mkdir -p %t && cp %S/Inputs/manifest.json %t/
// RUN: kiln-translate --hlo-to-proto %s -o %t/model.hlo.pb
// RUN: not kiln check-hlo --neuron %t | FileCheck %s
// CHECK: FAIL neff-names       parameter 0 has no neff_input_names
// CHECK: FAIL neff-names       the root has 2 results but neff_output_names lists 0
// CHECK: FAIL manifest-names   parameter 0 is 'w' in the manifest but '' in the module
// CHECK: FAIL manifest-names   the manifest lists 2 outputs, the module has 0
// CHECK: 2 of 8 rules broken

module {
  func.func @train_step(%w: tensor<4x8xf32>, %rank: tensor<i32> {kiln.rank = "rank"})
      -> (tensor<4x8xf32>, tensor<8x8xf32> {kiln.output = "gathered"}) {
    %g = hlo.all_gather %w {all_gather_dim = 0 : i64, replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>} : (tensor<4x8xf32>) -> tensor<8x8xf32>
    return %w, %g : tensor<4x8xf32>, tensor<8x8xf32>
  }
}
