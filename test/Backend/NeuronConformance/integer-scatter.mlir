// integer-scatter: an s32 scatter with an add combiner (NCC_EVRF016); a
// float32 scatter-add passes.
// RUN: rm -rf %t && mkdir -p %t && cp %S/Inputs/manifest.json %t/
// RUN: kiln-translate --hlo-to-proto %s -o %t/model.hlo.pb
// RUN: not kiln check-hlo --neuron %t | FileCheck %s
// CHECK: FAIL integer-scatter  scatter.{{[0-9]+}} reduces integer data with 'add' (NCC_EVRF016)
// CHECK-NOT: FAIL integer-scatter
// CHECK: 1 of 8 rules broken

module {
  func.func @train_step(%w: tensor<4x8xf32> {kiln.param = "w"}, %rank: tensor<i32> {kiln.rank = "rank"})
      -> (tensor<4x8xf32> {kiln.param = "w"}, tensor<8x8xf32> {kiln.output = "gathered"}) {
    %ids = hlo.iota {iota_dimension = 0 : i64} : tensor<4xi32>
    %zi = hlo.constant {value = dense<0> : tensor<4x8xi32>} : tensor<4x8xi32>
    %ui = hlo.constant {value = dense<1> : tensor<4x8xi32>} : tensor<4x8xi32>
    %si = hlo.scatter %zi, %ids, %ui {combiner = #hlo<combiner add>, index_vector_dim = 1 : i64, inserted_window_dims = array<i64: 0>, scatter_dims_to_operand_dims = array<i64: 0>, update_window_dims = array<i64: 1>} : (tensor<4x8xi32>, tensor<4xi32>, tensor<4x8xi32>) -> tensor<4x8xi32>
    %sf = hlo.scatter %w, %ids, %w {combiner = #hlo<combiner add>, index_vector_dim = 1 : i64, inserted_window_dims = array<i64: 0>, scatter_dims_to_operand_dims = array<i64: 0>, update_window_dims = array<i64: 1>} : (tensor<4x8xf32>, tensor<4xi32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %c = hlo.convert %si : (tensor<4x8xi32>) -> tensor<4x8xf32>
    %sum = hlo.add %sf, %c : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %g = hlo.all_gather %sum {all_gather_dim = 0 : i64, replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>} : (tensor<4x8xf32>) -> tensor<8x8xf32>
    return %w, %g : tensor<4x8xf32>, tensor<8x8xf32>
  }
}
