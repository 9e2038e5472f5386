// A kiln.cast lowers to a narrowing and a widening convert; then
// kiln-hlo-sink-converts makes the bf16 explicit: the parameter is
// all-gathered in bf16, the linear is a dot of bf16 operands with a float32
// result (float32 accumulation), and the result is rounded to bf16 where the
// cast put it; the gradient is reduce-scattered in float32.
// RUN: kiln-opt %s --kiln-lower-to-hlo | FileCheck %s --check-prefix=LOWER
// RUN: kiln-opt %s --kiln-lower-to-hlo --kiln-hlo-sink-converts --cse | FileCheck %s

// LOWER-LABEL: func.func @train_step(
// LOWER: %[[N:.*]] = hlo.convert %arg0 : (tensor<2x3x8xf32>) -> tensor<2x3x8xbf16>
// LOWER-NEXT: hlo.convert %[[N]] : (tensor<2x3x8xbf16>) -> tensor<2x3x8xf32>

// CHECK-LABEL: func.func @train_step(
// CHECK: %[[W:.*]] = hlo.convert %arg1 : (tensor<6x8xf32>) -> tensor<6x8xbf16>
// CHECK: %[[G:.*]] = hlo.all_gather %[[W]] {{.*}} : (tensor<6x8xbf16>) -> tensor<12x8xbf16>
// CHECK: %[[X:.*]] = hlo.convert %arg0 : (tensor<2x3x8xf32>) -> tensor<2x3x8xbf16>
// CHECK: %[[Y:.*]] = hlo.dot_general %[[X]], %[[G]] {{.*}} : (tensor<2x3x8xbf16>, tensor<12x8xbf16>) -> tensor<2x3x12xf32>
// CHECK: %[[YB:.*]] = hlo.convert %[[Y]] : (tensor<2x3x12xf32>) -> tensor<2x3x12xbf16>
// CHECK: %[[YF:.*]] = hlo.convert %[[YB]] : (tensor<2x3x12xbf16>) -> tensor<2x3x12xf32>
// CHECK: hlo.reduce_scatter %[[YF]] {{.*}} : (tensor<2x3x12xf32>) -> tensor<2x3x6xf32>
module {
  shard.grid @grid(shape = 1x2x1)
  func.func @train_step(%x: tensor<2x3x8xf32>, %w: tensor<6x8xf32>) -> tensor<2x3x6xf32> {
    %wb = kiln.cast %w {fqn = "w1", to = bf16} : (tensor<6x8xf32>) -> tensor<6x8xf32>
    %g = shard.all_gather %wb on @grid grid_axes = [1] gather_axis = 0 : tensor<6x8xf32> -> tensor<12x8xf32>
    %xb = kiln.cast %x {fqn = "w1", to = bf16} : (tensor<2x3x8xf32>) -> tensor<2x3x8xf32>
    %y = kiln.linear %xb, %g {fqn = "w1"} : (tensor<2x3x8xf32>, tensor<12x8xf32>) -> tensor<2x3x12xf32>
    %yb = kiln.cast %y {fqn = "w1", to = bf16} : (tensor<2x3x12xf32>) -> tensor<2x3x12xf32>
    %s = shard.reduce_scatter %yb on @grid grid_axes = [1] scatter_axis = 2 : tensor<2x3x12xf32> -> tensor<2x3x6xf32>
    return %s : tensor<2x3x6xf32>
  }
}
