// The hlo dialect's verifiers check what XLA's shape inference checks.
// RUN: kiln-opt %s -split-input-file -verify-diagnostics

func.func @broadcast_dims(%x: tensor<4xf32>) {
  // expected-error@+1 {{'hlo.broadcast_in_dim' op operand dimension 0 (4) does not broadcast to result dimension 1 (3)}}
  %0 = hlo.broadcast_in_dim %x {broadcast_dimensions = array<i64: 1>} : (tensor<4xf32>) -> tensor<4x3xf32>
  return
}

// -----

func.func @reshape_count(%x: tensor<4x3xf32>) {
  // expected-error@+1 {{'hlo.reshape' op reshape of 12 elements to 10}}
  %0 = hlo.reshape %x : (tensor<4x3xf32>) -> tensor<10xf32>
  return
}

// -----

func.func @dot_mismatch(%a: tensor<2x8xf32>, %b: tensor<4x6xf32>) {
  // expected-error@+1 {{'hlo.dot_general' op lhs dimension 1 (8) does not match rhs dimension 1 (6)}}
  %0 = hlo.dot_general %a, %b {lhs_batching_dimensions = array<i64>, lhs_contracting_dimensions = array<i64: 1>, rhs_batching_dimensions = array<i64>, rhs_contracting_dimensions = array<i64: 1>} : (tensor<2x8xf32>, tensor<4x6xf32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @dot_result(%a: tensor<2x8xf32>, %b: tensor<4x8xf32>) {
  // expected-error@+1 {{'hlo.dot_general' op result shape [4, 2] should be [2, 4]}}
  %0 = hlo.dot_general %a, %b {lhs_batching_dimensions = array<i64>, lhs_contracting_dimensions = array<i64: 1>, rhs_batching_dimensions = array<i64>, rhs_contracting_dimensions = array<i64: 1>} : (tensor<2x8xf32>, tensor<4x8xf32>) -> tensor<4x2xf32>
  return
}

// -----

func.func @reduce_init(%x: tensor<4x3xf32>, %init: tensor<1xf32>) {
  // expected-error@+1 {{'hlo.reduce' op init must be a scalar of the operand's element type}}
  %0 = hlo.reduce %x, %init {combiner = #hlo<combiner add>, dimensions = array<i64: 1>} : (tensor<4x3xf32>, tensor<1xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @all_gather_overflow(%x: tensor<4611686018427387904x8xf32>) {
  // expected-error@+1 {{'hlo.all_gather' op dimension 0 (4611686018427387904) gathered from 2 ranks overflows int64}}
  %0 = hlo.all_gather %x {all_gather_dim = 0 : i64, replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>} : (tensor<4611686018427387904x8xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @all_gather_size(%x: tensor<2x8xf32>) {
  // expected-error@+1 {{'hlo.all_gather' op result shape [2, 8] should be [4, 8]}}
  %0 = hlo.all_gather %x {all_gather_dim = 0 : i64, channel_id = 1 : i64, replica_groups = dense<[[0, 1], [2, 3]]> : tensor<2x2xi64>, use_global_device_ids} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @all_to_all_blocks(%x: tensor<3x8xf32>) {
  // expected-error@+1 {{'hlo.all_to_all' op dimension 0 (3) does not split into 2 blocks}}
  %0 = hlo.all_to_all %x {channel_id = 1 : i64, replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>, split_dimension = 0 : i64} : (tensor<3x8xf32>) -> tensor<3x8xf32>
  return
}

// -----

func.func @all_to_all_global_ids(%x: tensor<2x8xf32>) {
  // expected-error@+1 {{'hlo.all_to_all' op all-to-all takes no use_global_device_ids (XLA's groups are partition ids)}}
  %0 = hlo.all_to_all %x {channel_id = 1 : i64, replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>, split_dimension = 0 : i64, use_global_device_ids} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @all_to_all_shape(%x: tensor<2x8xf32>) {
  // expected-error@+1 {{'hlo.all_to_all' op result shape [4, 4] should be [2, 8]}}
  %0 = hlo.all_to_all %x {channel_id = 1 : i64, replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>, split_dimension = 1 : i64} : (tensor<2x8xf32>) -> tensor<4x4xf32>
  return
}

// -----

func.func @replica_twice(%x: tensor<2x8xf32>) {
  // expected-error@+1 {{'hlo.all_reduce' op replica id 1 is negative or listed twice}}
  %0 = hlo.all_reduce %x {channel_id = 1 : i64, combiner = #hlo<combiner add>, replica_groups = dense<[[0, 1], [1, 3]]> : tensor<2x2xi64>, use_global_device_ids} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @channel(%x: tensor<4x8xf32>) {
  // expected-error@+1 {{'hlo.reduce_scatter' op channel_id must be positive}}
  %0 = hlo.reduce_scatter %x {channel_id = 0 : i64, combiner = #hlo<combiner add>, replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>, scatter_dimension = 0 : i64, use_global_device_ids} : (tensor<4x8xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @slice_bounds(%x: tensor<4x8xf32>) {
  // expected-error@+1 {{'hlo.slice' op slice [2:6:1] of dimension 0 of size 4}}
  %0 = hlo.slice %x {start_indices = array<i64: 2, 0>, limit_indices = array<i64: 6, 8>, strides = array<i64: 1, 1>} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return
}

// -----

func.func @gather_slice(%t: tensor<16x8xf32>, %ids: tensor<2x3xi32>) {
  // expected-error@+1 {{'hlo.gather' op collapsed dimension 0 must have slice size 1}}
  %0 = hlo.gather %t, %ids {collapsed_slice_dims = array<i64: 0>, index_vector_dim = 2 : i64, offset_dims = array<i64: 2>, slice_sizes = array<i64: 2, 8>, start_index_map = array<i64: 0>} : (tensor<16x8xf32>, tensor<2x3xi32>) -> tensor<2x3x8xf32>
  return
}

// -----

func.func @custom_call_alias(%x: tensor<4xf32>) {
  // expected-error@+1 {{'hlo.custom_call' op result 0 aliases operand 1, which does not exist}}
  %0 = hlo.custom_call %x {backend_config = "", call_target_name = "AwsNeuronCustomNativeKernel", output_operand_aliases = array<i64: 1>} : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @transpose_perm(%x: tensor<4x8xf32>) {
  // expected-error@+1 {{'hlo.transpose' op permutation entry lists dimension 0 twice}}
  %0 = hlo.transpose %x {permutation = array<i64: 0, 0>} : (tensor<4x8xf32>) -> tensor<4x4xf32>
  return
}

// -----

func.func @opt_barrier_type(%x: tensor<4xf32>, %y: tensor<2xi32>) {
  // expected-error@+1 {{'hlo.opt_barrier' op result 1 has type 'tensor<2xf32>', operand 1 'tensor<2xi32>': it returns its operands}}
  %0:2 = hlo.opt_barrier %x, %y : (tensor<4xf32>, tensor<2xi32>) -> (tensor<4xf32>, tensor<2xf32>)
  return
}

// -----

func.func @opt_barrier_count(%x: tensor<4xf32>) {
  // expected-error@+1 {{'hlo.opt_barrier' op has 1 operands but 2 results: it returns its operands}}
  %0:2 = hlo.opt_barrier %x : (tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>)
  return
}
