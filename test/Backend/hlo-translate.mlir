// The translation of the hlo dialect to XLA: HLO text (printed from the
// HloModuleProto) and the serialized proto, which reads back to the same
// text. Combiners become computations before the entry; several results of
// a custom call a tuple and get-tuple-elements; parameters and results of
// one kiln.param alias (must-alias); named parameters and results carry
// neuronx-cc's NEFF tensor names. The dialect mirrors XLA, so the
// flattened-id form of collectives (channel ids, use_global_device_ids)
// translates too; the Neuron conformance check is what refuses it.
// RUN: kiln-translate --hlo-to-text %s | FileCheck %s
// RUN: kiln-translate --hlo-to-text %s > %t.txt
// RUN: kiln-translate --hlo-to-proto %s > %t.pb
// RUN: kiln-translate --hlo-proto-to-text %t.pb | diff - %t.txt

// CHECK: HloModule train_step, entry_computation_layout={(f32[4,8]{1,0}, s64[2,3]{1,0}, f32[])->(f32[4,8]{1,0}, f32[8]{0}, f32[2,3,8]{2,1,0}, f32[2,3,8]{2,1,0}, f32[4,8]{1,0})}, input_output_alias={ {0}: (0, {}, must-alias) }
// CHECK: %add.f32 (lhs.{{[0-9]+}}: f32[], rhs.{{[0-9]+}}: f32[]) -> f32[] {
// CHECK:   ROOT %add.[[ID:[0-9]+]] = f32[] add(f32[] %lhs.{{[0-9]+}}, f32[] %rhs.{{[0-9]+}})
// CHECK: ENTRY %main.{{[0-9]+}} (p0.1: f32[4,8], p1.2: s64[2,3], p2.3: f32[]) -> (f32[4,8], f32[8], f32[2,3,8], f32[2,3,8], f32[4,8]) {
// CHECK:   %p0.1 = f32[4,8]{1,0} parameter(0), frontend_attributes={neff_input_names="model.norm.weight"}, metadata={op_name="model.norm.weight"}
// CHECK:   %p2.3 = f32[] parameter(2){{$}}
// CHECK:   %constant.[[C:[0-9]+]] = f32[] constant(0)
// CHECK:   %reduce.{{[0-9]+}} = f32[8]{0} reduce(f32[4,8]{1,0} %p0.1, f32[] %constant.[[C]]), dimensions={0}, to_apply=%add.f32
// CHECK:   %convert.[[IDS:[0-9]+]] = s32[2,3]{1,0} convert(s64[2,3]{1,0} %p1.2)
// CHECK:   %gather.{{[0-9]+}} = f32[2,3,8]{2,1,0} gather(f32[4,8]{1,0} %p0.1, s32[2,3]{1,0} %convert.[[IDS]]), offset_dims={2}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=2, slice_sizes={1,8}
// CHECK:   %broadcast.{{[0-9]+}} = f32[2,3,8]{2,1,0} broadcast(f32[] %p2.3), dimensions={}
// CHECK:   %dot.{{[0-9]+}} = f32[2,3,4]{2,1,0} dot(f32[2,3,8]{2,1,0} %multiply.{{[0-9]+}}, f32[4,8]{1,0} %p0.1), lhs_contracting_dims={2}, rhs_contracting_dims={1}
// CHECK:   %iota.{{[0-9]+}} = s32[4]{0} iota(), iota_dimension=0
// CHECK:   %compare.{{[0-9]+}} = pred[4]{0} compare(s32[4]{0} %iota.{{[0-9]+}}, s32[4]{0} %iota.{{[0-9]+}}), direction=GE
// CHECK:   %slice.{{[0-9]+}} = f32[2,8]{1,0} slice(f32[4,8]{1,0} %p0.1), slice={[1:3], [0:8]}
// CHECK:   %pad.{{[0-9]+}} = f32[5,8]{1,0} pad(f32[4,8]{1,0} %p0.1, f32[] %constant.[[C]]), padding=0_1x0_0
// CHECK:   %all-gather.{{[0-9]+}} = f32[8,8]{1,0} all-gather(f32[4,8]{1,0} %p0.1), channel_id=1, replica_groups={{[{][{]}}0,1},{2,3}}, dimensions={0}, use_global_device_ids=true
// CHECK:   %reduce-scatter.{{[0-9]+}} = f32[2,8]{1,0} reduce-scatter(f32[4,8]{1,0} %p0.1), channel_id=2, replica_groups={{[{][{]}}0,1},{2,3}}, dimensions={0}, use_global_device_ids=true, to_apply=%add.f32
// CHECK:   %all-reduce.{{[0-9]+}} = f32[4,8]{1,0} all-reduce(f32[4,8]{1,0} %p0.1), channel_id=3, replica_groups={{[{][{]}}0,1,2,3}}, use_global_device_ids=true, to_apply=%max.f32
// XLA's all-to-all has no use_global_device_ids: with a channel id its groups are partition ids.
// CHECK:   %all-to-all.{{[0-9]+}} = f32[4,8]{1,0} all-to-all(f32[4,8]{1,0} %p0.1), channel_id=4, replica_groups={{[{][{]}}0,2},{1,3}}, dimensions={0}{{$}}
// CHECK:   %custom-call.[[CC:[0-9]+]] = (f32[2,3,8]{2,1,0}, f32[2,3,8]{2,1,0}) custom-call(f32[2,3,8]{2,1,0} %gather.{{[0-9]+}}), custom_call_target="AwsNeuronCustomNativeKernel", backend_config="{\"kernel\":\"k\"}"
// CHECK:   %get-tuple-element.{{[0-9]+}} = f32[2,3,8]{2,1,0} get-tuple-element((f32[2,3,8]{2,1,0}, f32[2,3,8]{2,1,0}) %custom-call.[[CC]]), index=0
// CHECK:   ROOT %tuple.{{[0-9]+}} = (f32[4,8]{1,0}, f32[8]{0}, f32[2,3,8]{2,1,0}, f32[2,3,8]{2,1,0}, f32[4,8]{1,0}) tuple(

module attributes {hlo.replica_count = 4 : i64} {
  func.func @train_step(%w: tensor<4x8xf32> {kiln.param = "model.norm.weight"}, %ids: tensor<2x3xi64> {kiln.input = "input_ids"},
                        %s: tensor<f32>)
      -> (tensor<4x8xf32> {kiln.param = "model.norm.weight"}, tensor<8xf32>, tensor<2x3x8xf32>, tensor<2x3x8xf32>, tensor<4x8xf32>) {
    %zero = hlo.constant {value = dense<0.0> : tensor<f32>} : tensor<f32>
    %sum = hlo.reduce %w, %zero {combiner = #hlo<combiner add>, dimensions = array<i64: 0>} : (tensor<4x8xf32>, tensor<f32>) -> tensor<8xf32>
    %ids32 = hlo.convert %ids : (tensor<2x3xi64>) -> tensor<2x3xi32>
    %rows = hlo.gather %w, %ids32 {collapsed_slice_dims = array<i64: 0>, index_vector_dim = 2 : i64, offset_dims = array<i64: 2>, slice_sizes = array<i64: 1, 8>, start_index_map = array<i64: 0>} : (tensor<4x8xf32>, tensor<2x3xi32>) -> tensor<2x3x8xf32>
    %b = hlo.broadcast_in_dim %s {broadcast_dimensions = array<i64>} : (tensor<f32>) -> tensor<2x3x8xf32>
    %scaled = hlo.multiply %rows, %b : (tensor<2x3x8xf32>, tensor<2x3x8xf32>) -> tensor<2x3x8xf32>
    %logits = hlo.dot_general %scaled, %w {lhs_batching_dimensions = array<i64>, lhs_contracting_dimensions = array<i64: 2>, rhs_batching_dimensions = array<i64>, rhs_contracting_dimensions = array<i64: 1>} : (tensor<2x3x8xf32>, tensor<4x8xf32>) -> tensor<2x3x4xf32>
    %i = hlo.iota {iota_dimension = 0 : i64} : tensor<4xi32>
    %c = hlo.compare %i, %i {comparison_direction = #hlo<comparison_direction GE>} : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi1>
    %sl = hlo.slice %w {start_indices = array<i64: 1, 0>, limit_indices = array<i64: 3, 8>, strides = array<i64: 1, 1>} : (tensor<4x8xf32>) -> tensor<2x8xf32>
    %p = hlo.pad %w, %zero {edge_padding_low = array<i64: 0, 0>, edge_padding_high = array<i64: 1, 0>, interior_padding = array<i64: 0, 0>} : (tensor<4x8xf32>, tensor<f32>) -> tensor<5x8xf32>
    %g = hlo.all_gather %w {all_gather_dim = 0 : i64, channel_id = 1 : i64, replica_groups = dense<[[0, 1], [2, 3]]> : tensor<2x2xi64>, use_global_device_ids} : (tensor<4x8xf32>) -> tensor<8x8xf32>
    %rs = hlo.reduce_scatter %w {channel_id = 2 : i64, combiner = #hlo<combiner add>, replica_groups = dense<[[0, 1], [2, 3]]> : tensor<2x2xi64>, scatter_dimension = 0 : i64, use_global_device_ids} : (tensor<4x8xf32>) -> tensor<2x8xf32>
    %ar = hlo.all_reduce %w {channel_id = 3 : i64, combiner = #hlo<combiner max>, replica_groups = dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>, use_global_device_ids} : (tensor<4x8xf32>) -> tensor<4x8xf32>
    %a2a = hlo.all_to_all %w {channel_id = 4 : i64, replica_groups = dense<[[0, 2], [1, 3]]> : tensor<2x2xi64>, split_dimension = 0 : i64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
    %k0, %k1 = hlo.custom_call %rows {backend_config = "{\"kernel\":\"k\"}", call_target_name = "AwsNeuronCustomNativeKernel"} : (tensor<2x3x8xf32>) -> (tensor<2x3x8xf32>, tensor<2x3x8xf32>)
    return %w, %sum, %scaled, %k0, %ar : tensor<4x8xf32>, tensor<8xf32>, tensor<2x3x8xf32>, tensor<2x3x8xf32>, tensor<4x8xf32>
  }
}
