// kiln-partition turns the annotated step into the program every rank runs:
// FSDP2 on 2 ranks of dp_shard, one all-gather per parameter use (reshard
// after forward), one reduce-scatter per gradient, the loss and the norm
// summed across ranks.
// RUN: kiln-opt %s --kiln-training --kiln-shard="dp-shard=2" --kiln-partition | FileCheck %s
// RUN: kiln-opt %s --kiln-training --kiln-shard="dp-shard=2" --kiln-partition="reshard-after-forward=never" | FileCheck %s --check-prefix=NEVER
// RUN: kiln-opt %s --kiln-training="microbatches=2" --kiln-shard="dp-shard=2" --kiln-partition | FileCheck %s --check-prefix=ACCUM
// RUN: not kiln-opt %s --kiln-training --kiln-partition 2>&1 | FileCheck %s --check-prefix=BARE
// RUN: not kiln-opt %s --kiln-training --kiln-shard="dp-shard=2" --kiln-partition --kiln-partition 2>&1 | FileCheck %s --check-prefix=BARE

func.func @loss(%ids: tensor<4x3xi64> {kiln.input = "input_ids"},
                %labels: tensor<4x3xi64> {kiln.input = "labels"},
                %table: tensor<16x8xf32> {kiln.param = "model.embed_tokens.weight"},
                %w: tensor<8x8xf32> {kiln.param = "model.layers.0.mlp.down_proj.weight"},
                %norm: tensor<8xf32> {kiln.param = "model.norm.weight"}) -> tensor<f32> {
  %h = kiln.embedding %table, %ids {fqn = "tok_embeddings"} : (tensor<16x8xf32>, tensor<4x3xi64>) -> tensor<4x3x8xf32>
  %d = kiln.linear %h, %w {fqn = "layers.0.feed_forward.w2"} : (tensor<4x3x8xf32>, tensor<8x8xf32>) -> tensor<4x3x8xf32>
  %r = kiln.add %h, %d {fqn = "layers.0.ffn_residual"} : (tensor<4x3x8xf32>, tensor<4x3x8xf32>) -> tensor<4x3x8xf32>
  %n = kiln.rms_norm %r, %norm {eps = 1.0e-6 : f32, fqn = "norm"} : (tensor<4x3x8xf32>, tensor<8xf32>) -> tensor<4x3x8xf32>
  %logits = kiln.linear %n, %table {fqn = "output"} : (tensor<4x3x8xf32>, tensor<16x8xf32>) -> tensor<4x3x16xf32>
  %loss = kiln.cross_entropy %logits, %labels {fqn = "loss"} : (tensor<4x3x16xf32>, tensor<4x3xi64>) -> tensor<f32>
  return %loss : tensor<f32>
}

// CHECK: module attributes {kiln.grid_axes = ["dp_replicate", "dp_shard", "tp"]}

// Local shapes: each rank stores half of every parameter and moment, and
// takes half of the batch.
// CHECK-LABEL: func.func @train_step(
// CHECK-SAME: %[[TABLE:.*]]: tensor<8x8xf32> {kiln.param = "model.embed_tokens.weight"
// CHECK-SAME: %[[W:.*]]: tensor<4x8xf32> {kiln.param = "model.layers.0.mlp.down_proj.weight"
// CHECK-SAME: %[[NORM:.*]]: tensor<4xf32> {kiln.param = "model.norm.weight"
// CHECK-SAME: tensor<2x3xi64> {kiln.input = "input_ids"
// Forward: each parameter gathered right before its use.
// CHECK: %[[T0:.*]] = shard.all_gather %[[TABLE]] on @grid grid_axes = [1] gather_axis = 0 : tensor<8x8xf32> -> tensor<16x8xf32>
// CHECK-NEXT: kiln.embedding %[[T0]], {{.*}} -> tensor<2x3x8xf32>
// CHECK: %[[W0:.*]] = shard.all_gather %[[W]] on @grid grid_axes = [1] gather_axis = 0
// CHECK-NEXT: kiln.linear {{.*}}, %[[W0]] {fqn = "layers.0.feed_forward.w2"}
// CHECK: shard.all_gather %[[NORM]]
// CHECK: %[[T1:.*]] = shard.all_gather %[[TABLE]]
// CHECK-NEXT: kiln.linear {{.*}}, %[[T1]] {fqn = "output"
// The mean over this rank's positions divides by the global count; the
// ranks' parts sum to the loss.
// CHECK: %[[PART:.*]] = kiln.cross_entropy {{.*}}total_positions = 12 : i64
// CHECK-NEXT: %[[LOSS:.*]] = shard.all_reduce %[[PART]] on @grid grid_axes = [1] : tensor<f32> -> tensor<f32>
// Backward: parameters gathered again; each weight gradient reduce-scattered
// into the parameter's shards, the tied table's once, after its two parts.
// CHECK: kiln.cross_entropy_backward {{.*}}total_positions = 12 : i64
// CHECK: shard.all_gather %[[TABLE]]
// CHECK: shard.all_gather %[[NORM]]
// CHECK: %[[DNORM:.*]] = shard.reduce_scatter %{{.*}} on @grid grid_axes = [1] scatter_axis = 0 : tensor<8xf32> -> tensor<4xf32>
// CHECK: shard.all_gather %[[W]]
// CHECK: %[[DW:.*]] = shard.reduce_scatter %{{.*}} scatter_axis = 0 : tensor<8x8xf32> -> tensor<4x8xf32>
// CHECK: %[[DT:.*]] = kiln.add {{.*}}fqn = "tok_embeddings.grad_accum"} : (tensor<16x8xf32>, tensor<16x8xf32>)
// CHECK-NEXT: %[[DTS:.*]] = shard.reduce_scatter %[[DT]] {{.*}} : tensor<16x8xf32> -> tensor<8x8xf32>
// The global norm from the shards: local sums of squares, summed, rooted.
// CHECK-NEXT: %[[SQ:.*]] = kiln.global_norm %[[DTS]], %[[DW]], %[[DNORM]] {fqn = "optimizer.grad_norm", squared}
// CHECK-NEXT: %[[SUM:.*]] = shard.all_reduce %[[SQ]] on @grid grid_axes = [1]
// CHECK-NEXT: %[[GN:.*]] = kiln.sqrt %[[SUM]]
// AdamW on the local shards.
// CHECK: kiln.adamw %[[TABLE]], %[[DTS]], {{.*}} -> (tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>)
// CHECK: return {{.*}}, %[[LOSS]], %[[GN]] :
// CHECK-NOT: kiln.loops

// Kept gathered from the forward to the backward: one all-gather per parameter.
// NEVER-LABEL: func.func @train_step(
// NEVER-COUNT-3: shard.all_gather
// NEVER-NOT: shard.all_gather
// NEVER: return

// Gradient accumulation over 2 microbatches: as FSDP2 does, each
// microbatch's gradients are reduce-scattered as they are made, and the
// accumulators are the parameters' shards.
// ACCUM-LABEL: func.func @train_step(
// ACCUM-SAME: tensor<2x3xi64> {kiln.input = "input_ids", kiln.microbatch = 0 : i64
// ACCUM-SAME: tensor<2x3xi64> {kiln.input = "input_ids", kiln.microbatch = 1 : i64
// ACCUM: %[[L0:.*]] = kiln.cross_entropy {{.*}}total_positions = 12 : i64
// ACCUM: %[[N0:.*]] = shard.reduce_scatter %{{.*}} : tensor<8xf32> -> tensor<4xf32>
// ACCUM: %[[W0:.*]] = shard.reduce_scatter %{{.*}} : tensor<8x8xf32> -> tensor<4x8xf32>
// ACCUM: %[[T0:.*]] = shard.reduce_scatter %{{.*}} : tensor<16x8xf32> -> tensor<8x8xf32>
// ACCUM: %[[L1:.*]] = kiln.cross_entropy {{.*}}total_positions = 12 : i64
// ACCUM: %[[N1:.*]] = shard.reduce_scatter %{{.*}} : tensor<8xf32> -> tensor<4xf32>
// ACCUM: %[[W1:.*]] = shard.reduce_scatter %{{.*}} : tensor<8x8xf32> -> tensor<4x8xf32>
// ACCUM: %[[T1:.*]] = shard.reduce_scatter %{{.*}} : tensor<16x8xf32> -> tensor<8x8xf32>
// ACCUM: %[[T:.*]] = kiln.add %[[T0]], %[[T1]] {{{.*}}kiln.accumulate} : (tensor<8x8xf32>, tensor<8x8xf32>)
// ACCUM: %[[W:.*]] = kiln.add %[[W0]], %[[W1]] {{{.*}}kiln.accumulate} : (tensor<4x8xf32>, tensor<4x8xf32>)
// ACCUM: %[[N:.*]] = kiln.add %[[N0]], %[[N1]] {{{.*}}kiln.accumulate} : (tensor<4xf32>, tensor<4xf32>)
// ACCUM: kiln.global_norm %[[T]], %[[W]], %[[N]] {fqn = "optimizer.grad_norm", squared}
// ACCUM-NOT: shard.reduce_scatter
// ACCUM: return

// BARE: error: kiln-partition: @train_step is not annotated for partitioning (run kiln-shard first; a partitioned program cannot be partitioned again)
