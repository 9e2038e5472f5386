// A kiln.cast lowers to a narrowing and a widening convert; then
// kiln-hlo-sink-converts makes the bf16 explicit: the parameter is
// all-gathered in bf16, the linear is a dot of bf16 operands with a float32
// result (float32 accumulation), and the result is rounded to bf16 where the
// cast put it; the gradient is reduce-scattered in float32.
// RUN: kiln-opt %s -split-input-file --kiln-lower-to-hlo | FileCheck %s --check-prefix=LOWER
// RUN: kiln-opt %s -split-input-file --kiln-lower-to-hlo --kiln-hlo-sink-converts --cse | FileCheck %s

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

// -----

// The all-to-all dispatcher's row tables: a zero row padded in front of bf16
// tokens stays bf16 (the padding value 0 is exact in bf16), and so do the
// rows gathered from it. A padding value that bf16 cannot hold (0.1) keeps
// the pad in float32.
// CHECK-LABEL: func.func @train_step(
// CHECK: %[[W:.*]] = hlo.convert %arg0 : (tensor<2x4xbf16>) -> tensor<2x4xf32>
// CHECK: %[[ZERO:.*]] = hlo.constant {value = dense<0.000000e+00> : tensor<bf16>} : tensor<bf16>
// CHECK: %[[T:.*]] = hlo.pad %arg0, %[[ZERO]] {{.*}} : (tensor<2x4xbf16>, tensor<bf16>) -> tensor<3x4xbf16>
// CHECK: %[[G:.*]] = hlo.gather %[[T]], %arg1 {{.*}} : (tensor<3x4xbf16>, tensor<5xi32>) -> tensor<5x4xbf16>
// CHECK: %[[GW:.*]] = hlo.convert %[[G]] : (tensor<5x4xbf16>) -> tensor<5x4xf32>
// CHECK: %[[P:.*]] = hlo.pad %[[W]], {{.*}} : (tensor<2x4xf32>, tensor<f32>) -> tensor<3x4xf32>
// CHECK: return %[[GW]], %[[P]]
func.func @train_step(%x: tensor<2x4xbf16>, %ids: tensor<5xi32>) -> (tensor<5x4xf32>, tensor<3x4xf32>) {
  %w = hlo.convert %x : (tensor<2x4xbf16>) -> tensor<2x4xf32>
  %zero = hlo.constant {value = dense<0.0> : tensor<f32>} : tensor<f32>
  %t = hlo.pad %w, %zero {edge_padding_high = array<i64: 0, 0>, edge_padding_low = array<i64: 1, 0>, interior_padding = array<i64: 0, 0>} : (tensor<2x4xf32>, tensor<f32>) -> tensor<3x4xf32>
  %g = hlo.gather %t, %ids {collapsed_slice_dims = array<i64: 0>, index_vector_dim = 1 : i64, offset_dims = array<i64: 1>, slice_sizes = array<i64: 1, 4>, start_index_map = array<i64: 0>} : (tensor<3x4xf32>, tensor<5xi32>) -> tensor<5x4xf32>
  %tenth = hlo.constant {value = dense<0.1> : tensor<f32>} : tensor<f32>
  %p = hlo.pad %w, %tenth {edge_padding_high = array<i64: 0, 0>, edge_padding_low = array<i64: 1, 0>, interior_padding = array<i64: 0, 0>} : (tensor<2x4xf32>, tensor<f32>) -> tensor<3x4xf32>
  return %g, %p : tensor<5x4xf32>, tensor<3x4xf32>
}

// -----

// Integer widening is exact too (HLO integers are signed): ids computed in
// s32 and converted to s64 for a kiln op's type move as s32 through a
// reshape, and the convert back to s32 that their consumer takes folds.
// CHECK-LABEL: func.func @train_step(
// CHECK-NEXT: %[[R:.*]] = hlo.reshape %arg0 : (tensor<2x3xi32>) -> tensor<6xi32>
// CHECK-NEXT: %[[W:.*]] = hlo.convert %[[R]] : (tensor<6xi32>) -> tensor<6xi64>
// CHECK-NEXT: return %[[R]], %[[W]]
func.func @train_step(%ids: tensor<2x3xi32>) -> (tensor<6xi32>, tensor<6xi64>) {
  %wide = hlo.convert %ids : (tensor<2x3xi32>) -> tensor<2x3xi64>
  %flat = hlo.reshape %wide : (tensor<2x3xi64>) -> tensor<6xi64>
  %back = hlo.convert %flat : (tensor<6xi64>) -> tensor<6xi32>
  return %back, %flat : tensor<6xi32>, tensor<6xi64>
}
