// Sequence parallelism with TP2: the residual stream is split on its
// sequence over tp from the embedding on; the colwise w1 all-gathers it, the
// rowwise w2 reduce-scatters into it, and the backward mirrors both.
// RUN: kiln-opt %s --kiln-training --kiln-shard="tp=2 sequence-parallel=true tp-plan=layers.*.w1=colwise,layers.*.w2=rowwise" --kiln-partition | FileCheck %s

func.func @loss(%ids: tensor<2x4xi64> {kiln.input = "input_ids"},
                %labels: tensor<2x4xi64> {kiln.input = "labels"},
                %table: tensor<16x8xf32> {kiln.param = "model.embed_tokens.weight"},
                %w1: tensor<12x8xf32> {kiln.param = "model.layers.0.mlp.gate_proj.weight"},
                %w2: tensor<8x12xf32> {kiln.param = "model.layers.0.mlp.down_proj.weight"}) -> tensor<f32> {
  %h = kiln.embedding %table, %ids {fqn = "tok_embeddings"} : (tensor<16x8xf32>, tensor<2x4xi64>) -> tensor<2x4x8xf32>
  %a = kiln.linear %h, %w1 {fqn = "layers.0.feed_forward.w1"} : (tensor<2x4x8xf32>, tensor<12x8xf32>) -> tensor<2x4x12xf32>
  %d = kiln.linear %a, %w2 {fqn = "layers.0.feed_forward.w2"} : (tensor<2x4x12xf32>, tensor<8x12xf32>) -> tensor<2x4x8xf32>
  %r = kiln.add %h, %d {fqn = "layers.0.ffn_residual"} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %logits = kiln.linear %r, %table {fqn = "output"} : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
  %loss = kiln.cross_entropy %logits, %labels {fqn = "loss"} : (tensor<2x4x16xf32>, tensor<2x4xi64>) -> tensor<f32>
  return %loss : tensor<f32>
}

// CHECK-LABEL: func.func @train_step(
// The embedding looks up this rank's positions only.
// CHECK: %[[IDS:.*]] = shard.all_slice %{{.*}} on @grid grid_axes = [2] slice_axis = 1 : tensor<2x4xi64> -> tensor<2x2xi64>
// CHECK-NEXT: %[[H:.*]] = kiln.embedding %{{.*}}, %[[IDS]] {{.*}} -> tensor<2x2x8xf32>
// CHECK-NEXT: %[[X:.*]] = shard.all_gather %[[H]] on @grid grid_axes = [2] gather_axis = 1 : tensor<2x2x8xf32> -> tensor<2x4x8xf32>
// CHECK-NEXT: kiln.linear %[[X]], {{.*}}fqn = "layers.0.feed_forward.w1"{{.*}} -> tensor<2x4x6xf32>
// CHECK-NEXT: %[[PART:.*]] = kiln.linear {{.*}}fqn = "layers.0.feed_forward.w2"{{.*}} -> tensor<2x4x8xf32>
// CHECK-NEXT: %[[RS:.*]] = shard.reduce_scatter %[[PART]] on @grid grid_axes = [2] scatter_axis = 1 : tensor<2x4x8xf32> -> tensor<2x2x8xf32>
// CHECK-NEXT: kiln.add %[[H]], %[[RS]] {{.*}} -> tensor<2x2x8xf32>
// The loss over this rank's positions; labels are sliced locally.
// CHECK: shard.all_slice %{{.*}} slice_axis = 1 : tensor<2x4xi64> -> tensor<2x2xi64>
// CHECK-NEXT: kiln.cross_entropy {{.*}}total_positions = 8 : i64
// Backward: gather before w2's input gradient, scatter after w1's. As in
// Megatron, w2's weight gradient takes the gathered output gradient and the
// local input features: it is this rank's [8, 6] shard, with no collective.
// CHECK: %[[DY:.*]] = shard.all_gather %{{.*}} gather_axis = 1 : tensor<2x2x8xf32> -> tensor<2x4x8xf32>
// CHECK-NEXT: kiln.linear_backward_data %[[DY]], {{.*}}fqn = "layers.0.feed_forward.w2"
// CHECK-NEXT: %[[DW2:.*]] = kiln.linear_backward_weight %[[DY]], {{.*}}fqn = "layers.0.feed_forward.w2"{{.*}} -> tensor<8x6xf32>
// CHECK: kiln.linear_backward_data {{.*}}fqn = "layers.0.feed_forward.w1"{{.*}} -> tensor<2x4x8xf32>
// CHECK: shard.reduce_scatter %{{.*}} scatter_axis = 1 : tensor<2x4x8xf32> -> tensor<2x2x8xf32>
// CHECK: kiln.adamw %{{.*}}, %[[DW2]],
