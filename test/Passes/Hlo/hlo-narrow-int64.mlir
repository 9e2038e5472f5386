// kiln-hlo-narrow-int64: every s64 value becomes s32 (arguments, results,
// instructions, constants); converts left between two s32 types fold away;
// a constant that does not fit in s32 is refused.
// RUN: kiln-opt %s -split-input-file -verify-diagnostics --kiln-hlo-narrow-int64 | FileCheck %s

// Token ids converted to s32 where they index: the convert folds away and
// the gather reads the parameter itself; the step counter and its increment
// become s32; float32 values are untouched.
// CHECK-LABEL: func.func @train_step(
// CHECK-SAME: %[[W:.*]]: tensor<4x8xf32>, %[[IDS:.*]]: tensor<2x3xi32> {kiln.input = "input_ids"}, %[[STEP:.*]]: tensor<i32> {kiln.state = "step"})
// CHECK-SAME: -> (tensor<2x3x8xf32>, tensor<i32> {kiln.state = "step"}, tensor<2x3xi32>)
// CHECK-NOT: hlo.convert
// CHECK: hlo.gather %[[W]], %[[IDS]]
// CHECK: %[[ONE:.*]] = hlo.constant {value = dense<1> : tensor<i32>} : tensor<i32>
// CHECK: %[[NEXT:.*]] = hlo.add %[[STEP]], %[[ONE]] : (tensor<i32>, tensor<i32>) -> tensor<i32>
// CHECK: %[[BIG:.*]] = hlo.constant {value = dense<[-2147483648, 2147483647]> : tensor<2xi32>} : tensor<2xi32>
// CHECK: return {{.*}}, %[[NEXT]], %[[IDS]] : tensor<2x3x8xf32>, tensor<i32>, tensor<2x3xi32>
module {
  func.func @train_step(%w: tensor<4x8xf32>, %ids: tensor<2x3xi64> {kiln.input = "input_ids"},
                        %step: tensor<i64> {kiln.state = "step"})
      -> (tensor<2x3x8xf32>, tensor<i64> {kiln.state = "step"}, tensor<2x3xi64>) {
    %ids32 = hlo.convert %ids : (tensor<2x3xi64>) -> tensor<2x3xi32>
    %rows = hlo.gather %w, %ids32 {collapsed_slice_dims = array<i64: 0>, index_vector_dim = 2 : i64, offset_dims = array<i64: 2>, slice_sizes = array<i64: 1, 8>, start_index_map = array<i64: 0>} : (tensor<4x8xf32>, tensor<2x3xi32>) -> tensor<2x3x8xf32>
    %one = hlo.constant {value = dense<1> : tensor<i64>} : tensor<i64>
    %next = hlo.add %step, %one : (tensor<i64>, tensor<i64>) -> tensor<i64>
    %big = hlo.constant {value = dense<[-2147483648, 2147483647]> : tensor<2xi64>} : tensor<2xi64>
    return %rows, %next, %ids : tensor<2x3x8xf32>, tensor<i64>, tensor<2x3xi64>
  }
}

// -----

module {
  func.func @train_step() -> tensor<i64> {
    // expected-error@+1 {{kiln-hlo-narrow-int64: constant value 2147483648 does not fit in s32}}
    %c = hlo.constant {value = dense<2147483648> : tensor<i64>} : tensor<i64>
    return %c : tensor<i64>
  }
}
