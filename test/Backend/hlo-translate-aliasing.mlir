// A custom call whose results alias operands (an NKI kernel that takes its
// output buffers as arguments, rope_hf's q_out and k_out) carries XLA's
// output_operand_aliasing: a tuple-shaped call names each result by its tuple
// index, a single-result call by the empty index; a result aliasing nothing
// (-1) has no entry. The proto keeps it (its text reads back the same).
// RUN: kiln-translate --hlo-to-text %s | FileCheck %s
// RUN: kiln-translate --hlo-to-text %s > %t.txt
// RUN: kiln-translate --hlo-to-proto %s > %t.pb
// RUN: kiln-translate --hlo-proto-to-text %t.pb | diff - %t.txt

// CHECK: (f32[2,4]{1,0}, f32[3,4]{1,0}) custom-call(f32[2,4]{1,0} %p0.{{[0-9]+}}, f32[3,4]{1,0} %p1.{{[0-9]+}}, f32[2,4]{1,0} %broadcast.{{[0-9]+}}, f32[3,4]{1,0} %broadcast.{{[0-9]+}}), custom_call_target="AwsNeuronCustomNativeKernel", backend_config="{}", output_to_operand_aliasing={{[{][{]}}0}: (2, {}), {1}: (3, {})}
// CHECK: f32[2,4]{1,0} custom-call(f32[2,4]{1,0} %p0.{{[0-9]+}}, f32[2,4]{1,0} %broadcast.{{[0-9]+}}), custom_call_target="AwsNeuronCustomNativeKernel", backend_config="{}", output_to_operand_aliasing={{[{][{]}}}: (1, {})}
// CHECK: (f32[2,4]{1,0}, f32[2,4]{1,0}) custom-call(f32[2,4]{1,0} %p0.{{[0-9]+}}, f32[2,4]{1,0} %broadcast.{{[0-9]+}}), custom_call_target="AwsNeuronCustomNativeKernel", backend_config="{}", output_to_operand_aliasing={{[{][{]}}1}: (1, {})}

module {
  func.func @train_step(%q: tensor<2x4xf32>, %k: tensor<3x4xf32>)
      -> (tensor<2x4xf32>, tensor<3x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>) {
    %zero = hlo.constant {value = dense<0.0> : tensor<f32>} : tensor<f32>
    %qb = hlo.broadcast_in_dim %zero {broadcast_dimensions = array<i64>} : (tensor<f32>) -> tensor<2x4xf32>
    %kb = hlo.broadcast_in_dim %zero {broadcast_dimensions = array<i64>} : (tensor<f32>) -> tensor<3x4xf32>
    %qo, %ko = hlo.custom_call %q, %k, %qb, %kb {backend_config = "{}", call_target_name = "AwsNeuronCustomNativeKernel", output_operand_aliases = array<i64: 2, 3>} : (tensor<2x4xf32>, tensor<3x4xf32>, tensor<2x4xf32>, tensor<3x4xf32>) -> (tensor<2x4xf32>, tensor<3x4xf32>)
    %one = hlo.custom_call %q, %qb {backend_config = "{}", call_target_name = "AwsNeuronCustomNativeKernel", output_operand_aliases = array<i64: 1>} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
    %a, %b = hlo.custom_call %q, %qb {backend_config = "{}", call_target_name = "AwsNeuronCustomNativeKernel", output_operand_aliases = array<i64: -1, 1>} : (tensor<2x4xf32>, tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>)
    return %qo, %ko, %one, %b : tensor<2x4xf32>, tensor<3x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>
  }
}
