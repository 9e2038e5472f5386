// hlo.opt_barrier in XLA: a tuple of its operands, one opt-barrier of that
// tuple's shape, and a get-tuple-element per result. The serialized proto
// reads back to the same text.
// RUN: kiln-translate --hlo-to-text %s | FileCheck %s
// RUN: kiln-translate --hlo-to-text %s > %t.txt
// RUN: kiln-translate --hlo-to-proto %s > %t.pb
// RUN: kiln-translate --hlo-proto-to-text %t.pb | diff - %t.txt

// CHECK: ENTRY %main.{{[0-9]+}} (p0.1: f32[4,8], p1.2: s32[3]) -> (f32[4,8], f32[4,8]) {
// CHECK:   %negate.[[NEG:[0-9]+]] = f32[4,8]{1,0} negate(f32[4,8]{1,0} %p0.1)
// CHECK:   %tuple.[[T:[0-9]+]] = (f32[4,8]{1,0}, s32[3]{0}, f32[4,8]{1,0}) tuple(f32[4,8]{1,0} %p0.1, s32[3]{0} %p1.2, f32[4,8]{1,0} %negate.[[NEG]]), metadata={op_name="layers.0.recompute"}
// CHECK:   %opt-barrier.[[B:[0-9]+]] = (f32[4,8]{1,0}, s32[3]{0}, f32[4,8]{1,0}) opt-barrier((f32[4,8]{1,0}, s32[3]{0}, f32[4,8]{1,0}) %tuple.[[T]]), metadata={op_name="layers.0.recompute"}
// CHECK:   %get-tuple-element.[[G0:[0-9]+]] = f32[4,8]{1,0} get-tuple-element((f32[4,8]{1,0}, s32[3]{0}, f32[4,8]{1,0}) %opt-barrier.[[B]]), index=0
// CHECK:   %get-tuple-element.{{[0-9]+}} = s32[3]{0} get-tuple-element((f32[4,8]{1,0}, s32[3]{0}, f32[4,8]{1,0}) %opt-barrier.[[B]]), index=1
// CHECK:   %get-tuple-element.{{[0-9]+}} = f32[4,8]{1,0} get-tuple-element((f32[4,8]{1,0}, s32[3]{0}, f32[4,8]{1,0}) %opt-barrier.[[B]]), index=2
// CHECK:   %negate.{{[0-9]+}} = f32[4,8]{1,0} negate(f32[4,8]{1,0} %get-tuple-element.[[G0]])
// CHECK:   ROOT %tuple.{{[0-9]+}} = (f32[4,8]{1,0}, f32[4,8]{1,0}) tuple(

module attributes {hlo.replica_count = 1 : i64} {
  func.func @train_step(%w: tensor<4x8xf32>, %i: tensor<3xi32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
    %fwd = hlo.negate %w : (tensor<4x8xf32>) -> tensor<4x8xf32>
    %b:3 = hlo.opt_barrier %w, %i, %fwd : (tensor<4x8xf32>, tensor<3xi32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<3xi32>, tensor<4x8xf32>) loc("layers.0.recompute")
    %re = hlo.negate %b#0 : (tensor<4x8xf32>) -> tensor<4x8xf32>
    return %fwd, %re : tensor<4x8xf32>, tensor<4x8xf32>
  }
}
