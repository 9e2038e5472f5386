// Every hlo op parsed, printed and parsed again, in the custom form and in
// the generic one: the printed text reads back as the same op with the same
// attributes. A new op joins this file.
// RUN: kiln-opt %s | kiln-opt | FileCheck %s
// RUN: kiln-opt %s -mlir-print-op-generic | kiln-opt | FileCheck %s

// CHECK-LABEL: func.func @leaves
func.func @leaves() -> (tensor<2xf32>, tensor<4xi32>, tensor<ui32>) {
  // CHECK: hlo.constant {value = dense<[1.000000e+00, 2.000000e+00]> : tensor<2xf32>} : tensor<2xf32>
  %c = hlo.constant {value = dense<[1.0, 2.0]> : tensor<2xf32>} : tensor<2xf32>
  // CHECK: hlo.iota {iota_dimension = 0 : i64} : tensor<4xi32>
  %i = hlo.iota {iota_dimension = 0 : i64} : tensor<4xi32>
  // CHECK: hlo.replica_id : tensor<ui32>
  %r = hlo.replica_id : tensor<ui32>
  return %c, %i, %r : tensor<2xf32>, tensor<4xi32>, tensor<ui32>
}

// CHECK-LABEL: func.func @elementwise
func.func @elementwise(%a: tensor<2x3xf32>, %b: tensor<2x3xf32>, %p: tensor<2x3xi1>,
                       %q: tensor<2x3xi1>) -> tensor<2x3xf32> {
  // CHECK: hlo.add %{{.*}}, %{{.*}} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %0 = hlo.add %a, %b : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: hlo.subtract
  %1 = hlo.subtract %0, %b : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: hlo.multiply
  %2 = hlo.multiply %1, %b : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: hlo.divide
  %3 = hlo.divide %2, %b : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: hlo.maximum
  %4 = hlo.maximum %3, %b : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: hlo.minimum
  %5 = hlo.minimum %4, %b : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: hlo.power
  %6 = hlo.power %5, %b : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: hlo.and %{{.*}}, %{{.*}} : (tensor<2x3xi1>, tensor<2x3xi1>) -> tensor<2x3xi1>
  %and = hlo.and %p, %q : (tensor<2x3xi1>, tensor<2x3xi1>) -> tensor<2x3xi1>
  // CHECK: hlo.exp %{{.*}} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %7 = hlo.exp %6 : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: hlo.log
  %8 = hlo.log %7 : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: hlo.rsqrt
  %9 = hlo.rsqrt %8 : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: hlo.sqrt
  %10 = hlo.sqrt %9 : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: hlo.negate
  %11 = hlo.negate %10 : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: hlo.cosine
  %12 = hlo.cosine %11 : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: hlo.sine
  %13 = hlo.sine %12 : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: hlo.sign
  %14 = hlo.sign %13 : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: hlo.convert %{{.*}} : (tensor<2x3xf32>) -> tensor<2x3xbf16>
  %15 = hlo.convert %14 : (tensor<2x3xf32>) -> tensor<2x3xbf16>
  // CHECK: hlo.convert %{{.*}} : (tensor<2x3xbf16>) -> tensor<2x3xf32>
  %16 = hlo.convert %15 : (tensor<2x3xbf16>) -> tensor<2x3xf32>
  // CHECK: hlo.compare %{{.*}}, %{{.*}} {comparison_direction = #hlo<comparison_direction LT>} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xi1>
  %lt = hlo.compare %16, %b {comparison_direction = #hlo<comparison_direction LT>} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xi1>
  %both = hlo.and %lt, %and : (tensor<2x3xi1>, tensor<2x3xi1>) -> tensor<2x3xi1>
  // CHECK: hlo.select %{{.*}}, %{{.*}}, %{{.*}} : (tensor<2x3xi1>, tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %17 = hlo.select %both, %16, %b : (tensor<2x3xi1>, tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  return %17 : tensor<2x3xf32>
}

// CHECK-LABEL: func.func @shapes
func.func @shapes(%x: tensor<4xf32>, %m: tensor<2x4xf32>, %i: tensor<i32>,
                  %z: tensor<f32>) -> (tensor<4x3xf32>, tensor<8xf32>, tensor<4x2xf32>,
                                       tensor<4x4xf32>, tensor<1x2xf32>, tensor<1x2xf32>,
                                       tensor<3x6xf32>) {
  // CHECK: hlo.broadcast_in_dim %{{.*}} {broadcast_dimensions = array<i64: 0>} : (tensor<4xf32>) -> tensor<4x3xf32>
  %0 = hlo.broadcast_in_dim %x {broadcast_dimensions = array<i64: 0>} : (tensor<4xf32>) -> tensor<4x3xf32>
  // CHECK: hlo.reshape %{{.*}} : (tensor<2x4xf32>) -> tensor<8xf32>
  %1 = hlo.reshape %m : (tensor<2x4xf32>) -> tensor<8xf32>
  // CHECK: hlo.transpose %{{.*}} {permutation = array<i64: 1, 0>} : (tensor<2x4xf32>) -> tensor<4x2xf32>
  %2 = hlo.transpose %m {permutation = array<i64: 1, 0>} : (tensor<2x4xf32>) -> tensor<4x2xf32>
  // CHECK: hlo.concatenate %{{.*}}, %{{.*}} {dimension = 0 : i64} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
  %3 = hlo.concatenate %m, %m {dimension = 0 : i64} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
  // CHECK: hlo.slice %{{.*}} {limit_indices = array<i64: 2, 4>, start_indices = array<i64: 1, 0>, strides = array<i64: 1, 2>} : (tensor<2x4xf32>) -> tensor<1x2xf32>
  %4 = hlo.slice %m {start_indices = array<i64: 1, 0>, limit_indices = array<i64: 2, 4>, strides = array<i64: 1, 2>} : (tensor<2x4xf32>) -> tensor<1x2xf32>
  // CHECK: hlo.dynamic_slice %{{.*}}, %{{.*}}, %{{.*}} {slice_sizes = array<i64: 1, 2>} : (tensor<2x4xf32>, tensor<i32>, tensor<i32>) -> tensor<1x2xf32>
  %5 = hlo.dynamic_slice %m, %i, %i {slice_sizes = array<i64: 1, 2>} : (tensor<2x4xf32>, tensor<i32>, tensor<i32>) -> tensor<1x2xf32>
  // CHECK: hlo.pad %{{.*}}, %{{.*}} {edge_padding_high = array<i64: 0, 1>, edge_padding_low = array<i64: 1, 0>, interior_padding = array<i64: 0, 1>} : (tensor<2x4xf32>, tensor<f32>) -> tensor<3x8xf32>
  %6 = hlo.pad %m, %z {edge_padding_low = array<i64: 1, 0>, edge_padding_high = array<i64: 0, 1>, interior_padding = array<i64: 0, 1>} : (tensor<2x4xf32>, tensor<f32>) -> tensor<3x8xf32>
  %7 = hlo.slice %6 {start_indices = array<i64: 0, 0>, limit_indices = array<i64: 3, 6>, strides = array<i64: 1, 1>} : (tensor<3x8xf32>) -> tensor<3x6xf32>
  return %0, %1, %2, %3, %4, %5, %7 : tensor<4x3xf32>, tensor<8xf32>, tensor<4x2xf32>, tensor<4x4xf32>, tensor<1x2xf32>, tensor<1x2xf32>, tensor<3x6xf32>
}

// CHECK-LABEL: func.func @contractions
func.func @contractions(%a: tensor<3x2x8xf32>, %b: tensor<3x8x5xf32>, %z: tensor<f32>)
    -> (tensor<3x2x5xf32>, tensor<3xf32>) {
  // CHECK: hlo.dot_general %{{.*}}, %{{.*}} {lhs_batching_dimensions = array<i64: 0>, lhs_contracting_dimensions = array<i64: 2>, rhs_batching_dimensions = array<i64: 0>, rhs_contracting_dimensions = array<i64: 1>} : (tensor<3x2x8xf32>, tensor<3x8x5xf32>) -> tensor<3x2x5xf32>
  %0 = hlo.dot_general %a, %b {lhs_batching_dimensions = array<i64: 0>, rhs_batching_dimensions = array<i64: 0>, lhs_contracting_dimensions = array<i64: 2>, rhs_contracting_dimensions = array<i64: 1>} : (tensor<3x2x8xf32>, tensor<3x8x5xf32>) -> tensor<3x2x5xf32>
  // CHECK: hlo.reduce %{{.*}}, %{{.*}} {combiner = #hlo<combiner max>, dimensions = array<i64: 1, 2>} : (tensor<3x2x5xf32>, tensor<f32>) -> tensor<3xf32>
  %1 = hlo.reduce %0, %z {dimensions = array<i64: 1, 2>, combiner = #hlo<combiner max>} : (tensor<3x2x5xf32>, tensor<f32>) -> tensor<3xf32>
  return %0, %1 : tensor<3x2x5xf32>, tensor<3xf32>
}

// CHECK-LABEL: func.func @indexing
func.func @indexing(%t: tensor<3x4xf32>, %ids: tensor<5x1xi32>, %u: tensor<5x4xf32>)
    -> (tensor<5x4xf32>, tensor<3x4xf32>) {
  // CHECK: hlo.gather %{{.*}}, %{{.*}} {collapsed_slice_dims = array<i64: 0>, index_vector_dim = 1 : i64, offset_dims = array<i64: 1>, slice_sizes = array<i64: 1, 4>, start_index_map = array<i64: 0>} : (tensor<3x4xf32>, tensor<5x1xi32>) -> tensor<5x4xf32>
  %g = hlo.gather %t, %ids {offset_dims = array<i64: 1>, collapsed_slice_dims = array<i64: 0>, start_index_map = array<i64: 0>, index_vector_dim = 1 : i64, slice_sizes = array<i64: 1, 4>} : (tensor<3x4xf32>, tensor<5x1xi32>) -> tensor<5x4xf32>
  // CHECK: hlo.scatter %{{.*}}, %{{.*}}, %{{.*}} {combiner = #hlo<combiner add>, index_vector_dim = 1 : i64, inserted_window_dims = array<i64: 0>, scatter_dims_to_operand_dims = array<i64: 0>, update_window_dims = array<i64: 1>} : (tensor<3x4xf32>, tensor<5x1xi32>, tensor<5x4xf32>) -> tensor<3x4xf32>
  %s = hlo.scatter %t, %ids, %u {update_window_dims = array<i64: 1>, inserted_window_dims = array<i64: 0>, scatter_dims_to_operand_dims = array<i64: 0>, index_vector_dim = 1 : i64, combiner = #hlo<combiner add>} : (tensor<3x4xf32>, tensor<5x1xi32>, tensor<5x4xf32>) -> tensor<3x4xf32>
  return %g, %s : tensor<5x4xf32>, tensor<3x4xf32>
}

// Each collective in the cross-replica form Kiln emits and in the forms the
// dialect also holds (a channel id, global device ids).
// CHECK-LABEL: func.func @collectives
func.func @collectives(%x: tensor<2x8xf32>) -> (tensor<4x8xf32>, tensor<1x8xf32>,
                                                tensor<2x8xf32>, tensor<2x8xf32>,
                                                tensor<2x8xf32>) {
  // CHECK: hlo.all_gather %{{.*}} {all_gather_dim = 0 : i64, replica_groups = dense<{{\[}}[0, 1], [2, 3]]> : tensor<2x2xi64>} : (tensor<2x8xf32>) -> tensor<4x8xf32>
  %0 = hlo.all_gather %x {all_gather_dim = 0 : i64, replica_groups = dense<[[0, 1], [2, 3]]> : tensor<2x2xi64>} : (tensor<2x8xf32>) -> tensor<4x8xf32>
  // CHECK: hlo.reduce_scatter %{{.*}} {combiner = #hlo<combiner add>, replica_groups = dense<{{\[}}[0, 1]]> : tensor<1x2xi64>, scatter_dimension = 0 : i64} : (tensor<2x8xf32>) -> tensor<1x8xf32>
  %1 = hlo.reduce_scatter %x {scatter_dimension = 0 : i64, combiner = #hlo<combiner add>, replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>} : (tensor<2x8xf32>) -> tensor<1x8xf32>
  // CHECK: hlo.all_reduce %{{.*}} {combiner = #hlo<combiner min>, replica_groups = dense<{{\[}}[0, 1, 2, 3]]> : tensor<1x4xi64>} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %2 = hlo.all_reduce %x {combiner = #hlo<combiner min>, replica_groups = dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  // CHECK: hlo.all_reduce %{{.*}} {channel_id = 3 : i64, combiner = #hlo<combiner mul>, replica_groups = dense<{{\[}}[0, 1], [2, 3]]> : tensor<2x2xi64>, use_global_device_ids} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %3 = hlo.all_reduce %x {channel_id = 3 : i64, combiner = #hlo<combiner mul>, replica_groups = dense<[[0, 1], [2, 3]]> : tensor<2x2xi64>, use_global_device_ids} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  // CHECK: hlo.all_to_all %{{.*}} {replica_groups = dense<{{\[}}[0, 1]]> : tensor<1x2xi64>, split_dimension = 0 : i64} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %4 = hlo.all_to_all %x {split_dimension = 0 : i64, replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  return %0, %1, %2, %3, %4 : tensor<4x8xf32>, tensor<1x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>
}

// CHECK-LABEL: func.func @calls
func.func @calls(%x: tensor<4xf32>, %y: tensor<2xi32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<2xi32>) {
  // CHECK: hlo.custom_call %{{.*}}, %{{.*}} {backend_config = "{\22k\22: 1}", call_target_name = "AwsNeuronCustomNativeKernel", output_operand_aliases = array<i64: 0>} : (tensor<4xf32>, tensor<2xi32>) -> tensor<4xf32>
  %0 = hlo.custom_call %x, %y {call_target_name = "AwsNeuronCustomNativeKernel", backend_config = "{\"k\": 1}", output_operand_aliases = array<i64: 0>} : (tensor<4xf32>, tensor<2xi32>) -> tensor<4xf32>
  // CHECK: hlo.opt_barrier %{{.*}}, %{{.*}} : (tensor<4xf32>, tensor<2xi32>) -> (tensor<4xf32>, tensor<2xi32>)
  %1:2 = hlo.opt_barrier %0, %y : (tensor<4xf32>, tensor<2xi32>) -> (tensor<4xf32>, tensor<2xi32>)
  return %0, %1#0, %1#1 : tensor<4xf32>, tensor<4xf32>, tensor<2xi32>
}
