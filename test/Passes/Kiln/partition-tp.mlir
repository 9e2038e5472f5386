// Tensor parallelism on 2 ranks (no sequence parallelism, see partition-sp.mlir): a colwise w1 and
// a rowwise w2 keep the MLP split on its hidden features with one
// all-reduce after w2 in the forward and one after w1's input gradient in
// the backward (Megatron's f and g); with FSDP2 x TP2 each rank stores a
// dp_shard piece of its tp shard and gathers only over dp_shard.
// RUN: kiln-opt %s --kiln-training --kiln-shard="tp=2 tp-plan=layers.*.w1=colwise,layers.*.w2=rowwise" --kiln-partition | FileCheck %s
// RUN: kiln-opt %s --kiln-training --kiln-shard="dp-shard=2 tp=2 tp-plan=layers.*.w1=colwise,layers.*.w2=rowwise" --kiln-partition | FileCheck %s --check-prefix=FSDP
// bf16 mixed precision (kiln-mixed-precision casts each parameter where it
// enters @loss): a cast parameter keeps its tensor-parallel split, and each
// use, forward and backward, gathers the parameter's shard and casts it
// again, as FSDP2 does; no weight is gathered over tp, none held gathered
// from the forward to the backward.
// RUN: kiln-opt %s --kiln-mixed-precision=param=bfloat16 --kiln-training --kiln-shard="dp-shard=2 tp=2 tp-plan=layers.*.w1=colwise,layers.*.w2=rowwise" --kiln-partition | FileCheck %s --check-prefix=MIXED
// RUN: kiln-opt %s --kiln-mixed-precision=param=bfloat16 --kiln-training --kiln-shard="dp-shard=2 tp=2 tp-plan=layers.*.w1=colwise,layers.*.w2=rowwise" --kiln-partition \
// RUN:   | not grep -E "all_gather.*grid_axes = \[(2|1, 2)\]"

// RUN: not kiln-opt %s --kiln-training --kiln-shard="tp=2 tp-plan=layers.*.wq=colwise" 2>&1 | FileCheck %s --check-prefix=NOMATCH
// RUN: not kiln-opt %s --kiln-training --kiln-shard="tp=2 tp-plan=layers.*.w1=sideways" 2>&1 | FileCheck %s --check-prefix=STYLE

func.func @loss(%ids: tensor<2x3xi64> {kiln.input = "input_ids"},
                %labels: tensor<2x3xi64> {kiln.input = "labels"},
                %table: tensor<16x8xf32> {kiln.param = "model.embed_tokens.weight"},
                %w1: tensor<12x8xf32> {kiln.param = "model.layers.0.mlp.gate_proj.weight"},
                %w2: tensor<8x12xf32> {kiln.param = "model.layers.0.mlp.down_proj.weight"}) -> tensor<f32> {
  %h = kiln.embedding %table, %ids {fqn = "tok_embeddings"} : (tensor<16x8xf32>, tensor<2x3xi64>) -> tensor<2x3x8xf32>
  %a = kiln.linear %h, %w1 {fqn = "layers.0.feed_forward.w1"} : (tensor<2x3x8xf32>, tensor<12x8xf32>) -> tensor<2x3x12xf32>
  %d = kiln.linear %a, %w2 {fqn = "layers.0.feed_forward.w2"} : (tensor<2x3x12xf32>, tensor<8x12xf32>) -> tensor<2x3x8xf32>
  %r = kiln.add %h, %d {fqn = "layers.0.ffn_residual"} : (tensor<2x3x8xf32>, tensor<2x3x8xf32>) -> tensor<2x3x8xf32>
  %logits = kiln.linear %r, %table {fqn = "output"} : (tensor<2x3x8xf32>, tensor<16x8xf32>) -> tensor<2x3x16xf32>
  %loss = kiln.cross_entropy %logits, %labels {fqn = "loss"} : (tensor<2x3x16xf32>, tensor<2x3xi64>) -> tensor<f32>
  return %loss : tensor<f32>
}

// CHECK-LABEL: func.func @train_step(
// CHECK-SAME: tensor<6x8xf32> {kiln.param = "model.layers.0.mlp.gate_proj.weight", kiln.sharding = #kiln.sharding<[{"tp"}, {}]>}
// CHECK-SAME: tensor<8x6xf32> {kiln.param = "model.layers.0.mlp.down_proj.weight", kiln.sharding = #kiln.sharding<[{}, {"tp"}]>}
// CHECK-SAME: tensor<2x3xi64> {kiln.input = "input_ids", kiln.sharding = #kiln.sharding<[{}, {}]>}
// Forward: w1 makes this rank's half of the hidden features, w2 a partial
// sum of the output, all-reduced before the residual add.
// CHECK: kiln.linear {{.*}}fqn = "layers.0.feed_forward.w1"{{.*}} : (tensor<2x3x8xf32>, tensor<6x8xf32>) -> tensor<2x3x6xf32>
// CHECK-NEXT: %[[PART:.*]] = kiln.linear {{.*}}fqn = "layers.0.feed_forward.w2"{{.*}} : (tensor<2x3x6xf32>, tensor<8x6xf32>) -> tensor<2x3x8xf32>
// CHECK-NEXT: %[[SUM:.*]] = shard.all_reduce %[[PART]] on @grid grid_axes = [2] : tensor<2x3x8xf32> -> tensor<2x3x8xf32>
// CHECK-NEXT: kiln.add %{{.*}}, %[[SUM]] {fqn = "layers.0.ffn_residual"
// Backward: w2's input gradient stays split; w1's input gradient is partial
// and all-reduced before it joins the residual stream.
// CHECK: kiln.linear_backward_data {{.*}}fqn = "layers.0.feed_forward.w2"} : (tensor<2x3x8xf32>, tensor<8x6xf32>) -> tensor<2x3x6xf32>
// CHECK: %[[DH:.*]] = kiln.linear_backward_data {{.*}}fqn = "layers.0.feed_forward.w1"} : (tensor<2x3x6xf32>, tensor<6x8xf32>) -> tensor<2x3x8xf32>
// Weight gradients are already the local shards.
// CHECK-NEXT: kiln.linear_backward_weight {{.*}}fqn = "layers.0.feed_forward.w1"} : (tensor<2x3x6xf32>, tensor<2x3x8xf32>) -> tensor<6x8xf32>
// CHECK-NEXT: shard.all_reduce %[[DH]] on @grid grid_axes = [2]
// The norm: the replicated table counted once, the tp shards summed over tp.
// CHECK: %[[WHOLE:.*]] = kiln.global_norm {{.*}}squared} : (tensor<16x8xf32>)
// CHECK-NEXT: %[[TP:.*]] = kiln.global_norm %{{.*}}, %{{.*}} {fqn = "optimizer.grad_norm", squared} : (tensor<6x8xf32>, tensor<8x6xf32>)
// CHECK-NEXT: %[[TPSUM:.*]] = shard.all_reduce %[[TP]] on @grid grid_axes = [2]
// CHECK-NEXT: %[[ALL:.*]] = kiln.add %[[WHOLE]], %[[TPSUM]]
// CHECK-NEXT: kiln.sqrt %[[ALL]]
// CHECK-NOT: shard.all_gather

// FSDP2 x TP2: w1 is stored as a dp_shard piece of the tp shard, gathered
// over dp_shard only.
// FSDP-LABEL: func.func @train_step(
// FSDP-SAME: tensor<3x8xf32> {kiln.param = "model.layers.0.mlp.gate_proj.weight", kiln.sharding = #kiln.sharding<[{"tp", "dp_shard"}, {}]>}
// FSDP: shard.all_gather %{{.*}} on @grid grid_axes = [1] gather_axis = 0 : tensor<3x8xf32> -> tensor<6x8xf32>

// MIXED-LABEL: func.func @train_step(
// MIXED: %[[G1:.*]] = shard.all_gather %arg1 on @grid grid_axes = [1] gather_axis = 0 : tensor<3x8xf32> -> tensor<6x8xf32>
// MIXED-NEXT: %[[C1:.*]] = kiln.cast %[[G1]] {fqn = "layers.0.feed_forward.w1", to = bf16} : (tensor<6x8xf32>) -> tensor<6x8xf32>
// MIXED-NEXT: kiln.linear %{{.*}}, %[[C1]] {fqn = "layers.0.feed_forward.w1"} : (tensor<1x3x8xf32>, tensor<6x8xf32>) -> tensor<1x3x6xf32>
// MIXED: %[[G2:.*]] = shard.all_gather %arg2 on @grid grid_axes = [1] gather_axis = 0 : tensor<4x6xf32> -> tensor<8x6xf32>
// MIXED-NEXT: %[[C2:.*]] = kiln.cast %[[G2]] {fqn = "layers.0.feed_forward.w2", to = bf16}
// MIXED-NEXT: kiln.linear %{{.*}}, %[[C2]] {fqn = "layers.0.feed_forward.w2"} : (tensor<1x3x6xf32>, tensor<8x6xf32>) -> tensor<1x3x8xf32>
// MIXED: %[[G3:.*]] = shard.all_gather %arg2 on @grid grid_axes = [1] gather_axis = 0 : tensor<4x6xf32> -> tensor<8x6xf32>
// MIXED-NEXT: %[[C3:.*]] = kiln.cast %[[G3]] {fqn = "layers.0.feed_forward.w2", to = bf16}
// MIXED-NEXT: kiln.linear_backward_data %{{.*}}, %[[C3]] {fqn = "layers.0.feed_forward.w2"}
// MIXED: %[[G4:.*]] = shard.all_gather %arg1 on @grid grid_axes = [1] gather_axis = 0 : tensor<3x8xf32> -> tensor<6x8xf32>
// MIXED-NEXT: %[[C4:.*]] = kiln.cast %[[G4]] {fqn = "layers.0.feed_forward.w1", to = bf16}
// MIXED-NEXT: kiln.linear_backward_data %{{.*}}, %[[C4]] {fqn = "layers.0.feed_forward.w1"}

// NOMATCH: error: kiln-shard: tp-plan entry 'layers.*.wq' matches no parameter's module
// STYLE: error: kiln-shard: tp-plan entry 'layers.*.w1=sideways' must be <module glob>=colwise or =rowwise
