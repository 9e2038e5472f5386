// A Qwen3-MoE layer under tensor parallelism and under FSDP2. With TP2 the
// stacked experts split like a dense MLP inside every expert (w1/w3 colwise
// on their intermediate dimension 1, w2 rowwise on dimension 2) while the
// router's gate stays whole: grouped_experts leaves a partial sum over tp,
// all-reduced before the residual add, and the experts' weight gradients
// come out already split. With FSDP2 the stacks are stored split on their
// expert dimension 0, gathered before each use, and their gradients
// reduce-scattered back into the shards.
// RUN: kiln-opt %s --kiln-training --kiln-shard="tp=2 sequence-parallel=false tp-plan=layers.*.moe.experts.w1=colwise,layers.*.moe.experts.w3=colwise,layers.*.moe.experts.w2=rowwise" --kiln-partition | FileCheck %s --implicit-check-not=shard.all_gather --implicit-check-not=shard.reduce_scatter
// RUN: kiln-opt %s --kiln-training --kiln-shard="dp-shard=2" --kiln-partition | FileCheck %s --check-prefix=FSDP
// RUN: kiln-opt %s --kiln-training --kiln-shard="dp-shard=2 ep=2" --kiln-partition | FileCheck %s --check-prefix=EP
// RUN: kiln-opt %s --kiln-substitute-kernels="rules=%S/Inputs/rules-experts.json target=cpu log=false" --kiln-training --kiln-shard="dp-shard=2 ep=2" --kiln-partition | FileCheck %s --check-prefix=EPKERNEL
// RUN: kiln-opt %s --kiln-expert-dispatch="groups=2 chunks=2" --kiln-training --kiln-shard="dp-shard=2 ep=2" --kiln-partition | FileCheck %s --check-prefix=A2A
// RUN: not kiln-opt %s --kiln-expert-dispatch="groups=2" --kiln-training --kiln-shard="dp-shard=2 ep=2" --kiln-partition 2>&1 | FileCheck %s --check-prefix=A2ACHUNKS
// RUN: not kiln-opt %s --kiln-training --kiln-shard="dp-shard=2 ep=3" 2>&1 | FileCheck %s --check-prefix=BADEP
// BADEP: kiln-shard: ep=3 must divide dp-shard=2
// RUN: not kiln-opt %s --kiln-training --kiln-shard="dp-shard=8 ep=8" 2>&1 | FileCheck %s --check-prefix=EPEXPERTS
// EPEXPERTS: kiln-shard: expert stack 'model.layers.0.mlp.experts.*.gate_proj.weight' cannot split its experts over ep=8

// The plan names the expert stacks by the grouped_experts op's fqn plus the
// operand (kiln::parameterPath); the router's gate is a plain linear.
func.func @loss(%ids: tensor<2x3xi64> {kiln.input = "input_ids"},
                %labels: tensor<2x3xi64> {kiln.input = "labels"},
                %table: tensor<16x8xf32> {kiln.param = "model.embed_tokens.weight"},
                %gate: tensor<4x8xf32> {kiln.param = "model.layers.0.mlp.gate.weight"},
                %w1: tensor<4x6x8xf32> {kiln.param = "model.layers.0.mlp.experts.*.gate_proj.weight"},
                %w3: tensor<4x6x8xf32> {kiln.param = "model.layers.0.mlp.experts.*.up_proj.weight"},
                %w2: tensor<4x8x6xf32> {kiln.param = "model.layers.0.mlp.experts.*.down_proj.weight"}) -> tensor<f32> {
  %h = kiln.embedding %table, %ids {fqn = "tok_embeddings"} : (tensor<16x8xf32>, tensor<2x3xi64>) -> tensor<2x3x8xf32>
  %rl = kiln.linear %h, %gate {fqn = "layers.0.moe.router.gate"} : (tensor<2x3x8xf32>, tensor<4x8xf32>) -> tensor<2x3x4xf32>
  %w, %e, %p = kiln.router %rl {norm_topk_prob, top_k = 2 : i64, fqn = "layers.0.moe.router"} : (tensor<2x3x4xf32>) -> (tensor<2x3x2xf32>, tensor<2x3x2xi64>, tensor<2x3x4xf32>)
  %y = kiln.grouped_experts %h, %w, %e, %w1, %w3, %w2 {fqn = "layers.0.moe.experts"} : (tensor<2x3x8xf32>, tensor<2x3x2xf32>, tensor<2x3x2xi64>, tensor<4x6x8xf32>, tensor<4x6x8xf32>, tensor<4x8x6xf32>) -> tensor<2x3x8xf32>
  %r = kiln.add %h, %y {fqn = "layers.0.ffn_residual"} : (tensor<2x3x8xf32>, tensor<2x3x8xf32>) -> tensor<2x3x8xf32>
  %logits = kiln.linear %r, %table {fqn = "output"} : (tensor<2x3x8xf32>, tensor<16x8xf32>) -> tensor<2x3x16xf32>
  %ce = kiln.cross_entropy %logits, %labels {fqn = "loss"} : (tensor<2x3x16xf32>, tensor<2x3xi64>) -> tensor<f32>
  %aux = kiln.load_balancing_loss %p, %e {fqn = "aux_loss"} : (tensor<2x3x4xf32>, tensor<2x3x2xi64>) -> tensor<f32>
  %s = kiln.scale %aux {factor = 1.0e-3 : f64, fqn = "aux_loss.scaled"} : (tensor<f32>) -> tensor<f32>
  %loss = kiln.add %ce, %s {fqn = "loss.with_aux"} : (tensor<f32>, tensor<f32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// TP2: the gate is replicated; w1 and w3 keep 3 of their 6 intermediate
// features per expert (dim 1), w2 3 of its 6 input features (dim 2).
// CHECK-LABEL: func.func @train_step(
// CHECK-SAME: tensor<4x8xf32> {kiln.param = "model.layers.0.mlp.gate.weight", kiln.sharding = #kiln.sharding<[{}, {}]>}
// CHECK-SAME: %[[W1:[a-z0-9]+]]: tensor<4x3x8xf32> {kiln.param = "model.layers.0.mlp.experts.*.gate_proj.weight", kiln.sharding = #kiln.sharding<[{}, {"tp"}, {}]>}
// CHECK-SAME: %[[W3:[a-z0-9]+]]: tensor<4x3x8xf32> {kiln.param = "model.layers.0.mlp.experts.*.up_proj.weight", kiln.sharding = #kiln.sharding<[{}, {"tp"}, {}]>}
// CHECK-SAME: %[[W2:[a-z0-9]+]]: tensor<4x8x3xf32> {kiln.param = "model.layers.0.mlp.experts.*.down_proj.weight", kiln.sharding = #kiln.sharding<[{}, {}, {"tp"}]>}
// Forward: every rank routes over all 4 experts with the whole gate...
// CHECK: kiln.linear {{.*}}fqn = "layers.0.moe.router.gate"{{.*}} : (tensor<2x3x8xf32>, tensor<4x8xf32>) -> tensor<2x3x4xf32>
// CHECK-NEXT: kiln.router {{.*}} : (tensor<2x3x4xf32>) -> (tensor<2x3x2xf32>, tensor<2x3x2xi64>, tensor<2x3x4xf32>)
// ...runs its half of each expert's MLP, and the partial outputs are summed
// over tp (grid axis 2) before the residual add.
// CHECK-NEXT: %[[PART:.*]] = kiln.grouped_experts %{{.*}}, %{{.*}}, %{{.*}}, %[[W1]], %[[W3]], %[[W2]] {fqn = "layers.0.moe.experts"} : (tensor<2x3x8xf32>, tensor<2x3x2xf32>, tensor<2x3x2xi64>, tensor<4x3x8xf32>, tensor<4x3x8xf32>, tensor<4x8x3xf32>) -> tensor<2x3x8xf32>
// CHECK-NEXT: %[[SUM:.*]] = shard.all_reduce %[[PART]] on @grid grid_axes = [2] : tensor<2x3x8xf32> -> tensor<2x3x8xf32>
// CHECK-NEXT: kiln.add %{{.*}}, %[[SUM]] {fqn = "layers.0.ffn_residual"
// Backward: the input's and the routing weights' gradients sum over the
// intermediate features, so both are all-reduced over tp; the router's
// backward reads the summed one.
// CHECK: %[[DX:[^,]+]], %[[DW:[^,]+]], %[[DW1:[^,]+]], %[[DW3:[^,]+]], %[[DW2:[^ ]+]] = kiln.grouped_experts_backward {{.*}}, %[[W1]], %[[W3]], %[[W2]] {fqn = "layers.0.moe.experts"} : {{.*}} -> (tensor<2x3x8xf32>, tensor<2x3x2xf32>, tensor<4x3x8xf32>, tensor<4x3x8xf32>, tensor<4x8x3xf32>)
// Each sum is resolved by its one reader, just before it.
// CHECK-NEXT: %[[DXSUM:.*]] = shard.all_reduce %[[DX]] on @grid grid_axes = [2] : tensor<2x3x8xf32> -> tensor<2x3x8xf32>
// CHECK-NEXT: kiln.add %{{.*}}, %[[DXSUM]] {fqn = "tok_embeddings.grad_accum"}
// CHECK-NEXT: %[[DWSUM:.*]] = shard.all_reduce %[[DW]] on @grid grid_axes = [2] : tensor<2x3x2xf32> -> tensor<2x3x2xf32>
// CHECK-NEXT: kiln.router_backward %{{.*}}, %{{.*}}, %[[DWSUM]], %{{.*}} {fqn = "layers.0.moe.router", norm_topk_prob} : (tensor<2x3x4xf32>,
// The experts' weight gradients are this rank's shards as they come out:
// the norm sums their squares over tp, AdamW updates the shards directly.
// CHECK: kiln.global_norm %[[DW1]], %[[DW3]], %[[DW2]] {fqn = "optimizer.grad_norm", squared} : (tensor<4x3x8xf32>, tensor<4x3x8xf32>, tensor<4x8x3xf32>) -> tensor<f32>
// CHECK-NEXT: shard.all_reduce %{{.*}} on @grid grid_axes = [2] : tensor<f32> -> tensor<f32>
// CHECK: kiln.adamw %[[W1]], %[[DW1]], {{.*}} -> (tensor<4x3x8xf32>, tensor<4x3x8xf32>, tensor<4x3x8xf32>)
// CHECK-NEXT: kiln.adamw %[[W3]], %[[DW3]], {{.*}} -> (tensor<4x3x8xf32>, tensor<4x3x8xf32>, tensor<4x3x8xf32>)
// CHECK-NEXT: kiln.adamw %[[W2]], %[[DW2]], {{.*}} -> (tensor<4x8x3xf32>, tensor<4x8x3xf32>, tensor<4x8x3xf32>)

// FSDP2 on 2 ranks: every parameter, the expert stacks included, is stored
// split on dim 0 (2 of the 4 experts per rank), and the batch is split.
// FSDP-LABEL: func.func @train_step(
// FSDP-SAME: %[[GATE:[a-z0-9]+]]: tensor<2x8xf32> {kiln.param = "model.layers.0.mlp.gate.weight", kiln.sharding = #kiln.sharding<[{"dp_shard"}, {}]>}
// FSDP-SAME: %[[W1:[a-z0-9]+]]: tensor<2x6x8xf32> {kiln.param = "model.layers.0.mlp.experts.*.gate_proj.weight", kiln.sharding = #kiln.sharding<[{"dp_shard"}, {}, {}]>}
// FSDP-SAME: %[[W3:[a-z0-9]+]]: tensor<2x6x8xf32> {kiln.param = "model.layers.0.mlp.experts.*.up_proj.weight", kiln.sharding = #kiln.sharding<[{"dp_shard"}, {}, {}]>}
// FSDP-SAME: %[[W2:[a-z0-9]+]]: tensor<2x8x6xf32> {kiln.param = "model.layers.0.mlp.experts.*.down_proj.weight", kiln.sharding = #kiln.sharding<[{"dp_shard"}, {}, {}]>}
// FSDP-SAME: tensor<1x3xi64> {kiln.input = "input_ids"
// Forward: the gate and the three stacks are gathered over dp_shard (grid
// axis 1) right before their use; the experts run on this rank's tokens.
// FSDP: %[[G:.*]] = shard.all_gather %[[GATE]] on @grid grid_axes = [1] gather_axis = 0 : tensor<2x8xf32> -> tensor<4x8xf32>
// FSDP-NEXT: kiln.linear %{{.*}}, %[[G]] {fqn = "layers.0.moe.router.gate"}
// FSDP: %[[G1:.*]] = shard.all_gather %[[W1]] on @grid grid_axes = [1] gather_axis = 0 : tensor<2x6x8xf32> -> tensor<4x6x8xf32>
// FSDP-NEXT: %[[G3:.*]] = shard.all_gather %[[W3]] on @grid grid_axes = [1] gather_axis = 0 : tensor<2x6x8xf32> -> tensor<4x6x8xf32>
// FSDP-NEXT: %[[G2:.*]] = shard.all_gather %[[W2]] on @grid grid_axes = [1] gather_axis = 0 : tensor<2x8x6xf32> -> tensor<4x8x6xf32>
// FSDP-NEXT: kiln.grouped_experts %{{.*}}, %{{.*}}, %{{.*}}, %[[G1]], %[[G3]], %[[G2]] {fqn = "layers.0.moe.experts"} : (tensor<1x3x8xf32>, tensor<1x3x2xf32>, tensor<1x3x2xi64>, tensor<4x6x8xf32>, tensor<4x6x8xf32>, tensor<4x8x6xf32>) -> tensor<1x3x8xf32>
// The load-balancing loss is not a sum of per-rank parts: it reads every
// rank's probs and ids, and is added once to the summed cross-entropy.
// FSDP: %[[P:.*]] = shard.all_gather %{{.*}} on @grid grid_axes = [1] gather_axis = 0 : tensor<1x3x4xf32> -> tensor<2x3x4xf32>
// FSDP-NEXT: %[[E:.*]] = shard.all_gather %{{.*}} on @grid grid_axes = [1] gather_axis = 0 : tensor<1x3x2xi64> -> tensor<2x3x2xi64>
// FSDP-NEXT: kiln.load_balancing_loss %[[P]], %[[E]] {fqn = "aux_loss"}
// FSDP-NEXT: %[[AUX:.*]] = kiln.scale
// FSDP-NEXT: %[[CE:.*]] = shard.all_reduce %{{.*}} on @grid grid_axes = [1] : tensor<f32> -> tensor<f32>
// FSDP-NEXT: kiln.add %[[CE]], %[[AUX]] {fqn = "loss.with_aux"}
// Backward: the stacks are gathered again (resharded after the forward),
// and each expert weight gradient, a partial sum over this rank's tokens,
// is reduce-scattered into the parameter's shards.
// FSDP: %[[B1:.*]] = shard.all_gather %[[W1]] on @grid grid_axes = [1] gather_axis = 0 : tensor<2x6x8xf32> -> tensor<4x6x8xf32>
// FSDP-NEXT: %[[B3:.*]] = shard.all_gather %[[W3]]
// FSDP-NEXT: %[[B2:.*]] = shard.all_gather %[[W2]]
// FSDP-NEXT: %{{[^,]+}}, %{{[^,]+}}, %[[DW1:[^,]+]], %[[DW3:[^,]+]], %[[DW2:[^ ]+]] = kiln.grouped_experts_backward {{.*}}, %[[B1]], %[[B3]], %[[B2]] {fqn = "layers.0.moe.experts"} : {{.*}} -> (tensor<1x3x8xf32>, tensor<1x3x2xf32>, tensor<4x6x8xf32>, tensor<4x6x8xf32>, tensor<4x8x6xf32>)
// FSDP-NEXT: %[[S1:.*]] = shard.reduce_scatter %[[DW1]] on @grid grid_axes = [1] scatter_axis = 0 : tensor<4x6x8xf32> -> tensor<2x6x8xf32>
// FSDP-NEXT: %[[S3:.*]] = shard.reduce_scatter %[[DW3]] on @grid grid_axes = [1] scatter_axis = 0 : tensor<4x6x8xf32> -> tensor<2x6x8xf32>
// FSDP-NEXT: %[[S2:.*]] = shard.reduce_scatter %[[DW2]] on @grid grid_axes = [1] scatter_axis = 0 : tensor<4x8x6xf32> -> tensor<2x8x6xf32>
// The aux loss's probs gradient is whole; each rank keeps its tokens' rows.
// FSDP: %[[DP:.*]] = shard.all_slice %{{.*}} on @grid grid_axes = [1] slice_axis = 0 : tensor<2x3x4xf32> -> tensor<1x3x4xf32>
// FSDP-NEXT: kiln.router_backward %{{.*}}, %{{.*}}, %{{.*}}, %[[DP]] {fqn = "layers.0.moe.router", norm_topk_prob} : (tensor<1x3x4xf32>,
// AdamW updates the stored expert shards.
// FSDP: kiln.adamw %[[W1]], %[[S1]], {{.*}} -> (tensor<2x6x8xf32>, tensor<2x6x8xf32>, tensor<2x6x8xf32>)
// FSDP-NEXT: kiln.adamw %[[W3]], %[[S3]], {{.*}} -> (tensor<2x6x8xf32>, tensor<2x6x8xf32>, tensor<2x6x8xf32>)
// FSDP-NEXT: kiln.adamw %[[W2]], %[[S2]], {{.*}} -> (tensor<2x8x6xf32>, tensor<2x8x6xf32>, tensor<2x8x6xf32>)

// EP2 (ep borrowed from dp_shard 2): the grid is [1, 1, 2, 1] and ep its
// axis 2. The stacks hold 2 of the 4 experts each, split over ep and never
// gathered; non-expert parameters are FSDP-sharded over [dp_shard, ep] (ep
// alone here, dp_shard being one rank), and the batch is split over ep too.
// EP: kiln.grid_axes = ["dp_replicate", "dp_shard", "ep", "tp"]
// EP: shard.grid @grid(shape = 1x1x2x1)
// EP-LABEL: func.func @train_step(
// EP-SAME: tensor<2x8xf32> {kiln.param = "model.layers.0.mlp.gate.weight", kiln.sharding = #kiln.sharding<[{"ep"}, {}]>}
// EP-SAME: %[[W1:[a-z0-9]+]]: tensor<2x6x8xf32> {kiln.param = "model.layers.0.mlp.experts.*.gate_proj.weight", kiln.sharding = #kiln.sharding<[{"ep"}, {}, {}]>}
// EP-SAME: %[[W3:[a-z0-9]+]]: tensor<2x6x8xf32> {kiln.param = "model.layers.0.mlp.experts.*.up_proj.weight", kiln.sharding = #kiln.sharding<[{"ep"}, {}, {}]>}
// EP-SAME: %[[W2:[a-z0-9]+]]: tensor<2x8x6xf32> {kiln.param = "model.layers.0.mlp.experts.*.down_proj.weight", kiln.sharding = #kiln.sharding<[{"ep"}, {}, {}]>}
// EP-SAME: tensor<1x3xi64> {kiln.input = "input_ids", kiln.sharding = #kiln.sharding<[{"ep"}, {}]>}
// Forward: the rank routes its own tokens; the tokens, their routing weights
// and their expert ids are gathered over ep; the local op runs this rank's
// 2 experts on the stacks as stored; its partial output goes back to the
// tokens' ranks by a reduce-scatter over ep.
// EP: %[[W:[a-z0-9_]+]], %[[IDS:[a-z0-9_]+]], %{{[a-z0-9_]+}} = kiln.router {{.*}} : (tensor<1x3x4xf32>) -> (tensor<1x3x2xf32>, tensor<1x3x2xi64>, tensor<1x3x4xf32>)
// EP-NEXT: %[[GX:.*]] = shard.all_gather %{{.*}} on @grid grid_axes = [2] gather_axis = 0 : tensor<1x3x8xf32> -> tensor<2x3x8xf32>
// EP-NEXT: %[[GW:.*]] = shard.all_gather %[[W]] on @grid grid_axes = [2] gather_axis = 0 : tensor<1x3x2xf32> -> tensor<2x3x2xf32>
// EP-NEXT: %[[GIDS:.*]] = shard.all_gather %[[IDS]] on @grid grid_axes = [2] gather_axis = 0 : tensor<1x3x2xi64> -> tensor<2x3x2xi64>
// EP-NEXT: %[[Y:.*]] = kiln.grouped_experts %[[GX]], %[[GW]], %[[GIDS]], %[[W1]], %[[W3]], %[[W2]] {expert_axes = array<i16: 2>, fqn = "layers.0.moe.experts", num_experts = 4 : i64} : (tensor<2x3x8xf32>, tensor<2x3x2xf32>, tensor<2x3x2xi64>, tensor<2x6x8xf32>, tensor<2x6x8xf32>, tensor<2x8x6xf32>) -> tensor<2x3x8xf32>
// EP-NEXT: %[[RS:.*]] = shard.reduce_scatter %[[Y]] on @grid grid_axes = [2] scatter_axis = 0 : tensor<2x3x8xf32> -> tensor<1x3x8xf32>
// EP-NEXT: kiln.add %{{.*}}, %[[RS]] {fqn = "layers.0.ffn_residual"
// Backward: the output gradient is gathered like the tokens; the input's
// and the routing weights' gradients, partial over ep, are reduce-scattered;
// the experts' weight gradients are the rank's blocks as they come out, and
// AdamW updates the stored blocks with no collective.
// EP: %[[GDY:.*]] = shard.all_gather %{{.*}} on @grid grid_axes = [2] gather_axis = 0 : tensor<1x3x8xf32> -> tensor<2x3x8xf32>
// EP-NEXT: %{{[^,]+}}, %[[DW:[^,]+]], %[[DW1:[^,]+]], %[[DW3:[^,]+]], %[[DW2:[^ ]+]] = kiln.grouped_experts_backward %[[GDY]], %[[GX]], %[[GW]], %[[GIDS]], %[[W1]], %[[W3]], %[[W2]] {expert_axes = array<i16: 2>, fqn = "layers.0.moe.experts", num_experts = 4 : i64} : {{.*}} -> (tensor<2x3x8xf32>, tensor<2x3x2xf32>, tensor<2x6x8xf32>, tensor<2x6x8xf32>, tensor<2x8x6xf32>)
// EP-NEXT: shard.reduce_scatter %{{.*}} on @grid grid_axes = [2] scatter_axis = 0 : tensor<2x3x8xf32> -> tensor<1x3x8xf32>
// EP: shard.reduce_scatter %[[DW]] on @grid grid_axes = [2] scatter_axis = 0 : tensor<2x3x2xf32> -> tensor<1x3x2xf32>
// EP: kiln.adamw %[[W1]], %[[DW1]], {{.*}} -> (tensor<2x6x8xf32>, tensor<2x6x8xf32>, tensor<2x6x8xf32>)
// EP-NEXT: kiln.adamw %[[W3]], %[[DW3]], {{.*}} -> (tensor<2x6x8xf32>, tensor<2x6x8xf32>, tensor<2x6x8xf32>)
// EP-NEXT: kiln.adamw %[[W2]], %[[DW2]], {{.*}} -> (tensor<2x8x6xf32>, tensor<2x8x6xf32>, tensor<2x8x6xf32>)

// EP2 with the experts substituted by nki_grouped_experts: the kernel's rule
// splits the expert loop as grouped_experts' does, so the stacks stay in
// their ep blocks (never gathered), the tokens are gathered over ep, and
// kiln-partition records the block in the call's options (the backends pass
// its first expert as one more operand).
// EPKERNEL-LABEL: func.func @train_step(
// EPKERNEL-SAME: %[[W1:[a-z0-9]+]]: tensor<2x6x8xf32> {kiln.param = "model.layers.0.mlp.experts.*.gate_proj.weight", kiln.sharding = #kiln.sharding<[{"ep"}, {}, {}]>}
// EPKERNEL-SAME: %[[W3:[a-z0-9]+]]: tensor<2x6x8xf32> {kiln.param = "model.layers.0.mlp.experts.*.up_proj.weight", kiln.sharding = #kiln.sharding<[{"ep"}, {}, {}]>}
// EPKERNEL-SAME: %[[W2:[a-z0-9]+]]: tensor<2x8x6xf32> {kiln.param = "model.layers.0.mlp.experts.*.down_proj.weight", kiln.sharding = #kiln.sharding<[{"ep"}, {}, {}]>}
// EPKERNEL-NOT: shard.all_gather %[[W1]]
// EPKERNEL: %[[GX:.*]] = shard.all_gather %{{.*}} on @grid grid_axes = [2] gather_axis = 0 : tensor<1x3x8xf32> -> tensor<2x3x8xf32>
// EPKERNEL-NEXT: %[[GW:.*]] = shard.all_gather %{{.*}} on @grid grid_axes = [2] gather_axis = 0 : tensor<1x3x2xf32> -> tensor<2x3x2xf32>
// EPKERNEL-NEXT: %[[GIDS:.*]] = shard.all_gather %{{.*}} on @grid grid_axes = [2] gather_axis = 0 : tensor<1x3x2xi64> -> tensor<2x3x2xi64>
// EPKERNEL-NEXT: %[[Y:.*]] = kiln.kernel "nki_grouped_experts"(%[[GX]], %[[GW]], %[[GIDS]], %[[W1]], %[[W3]], %[[W2]]) {fqn = "layers.0.moe.experts", options = {expert_axes = [2], num_experts = 4 : i64}, {{.*}} : (tensor<2x3x8xf32>, tensor<2x3x2xf32>, tensor<2x3x2xi64>, tensor<2x6x8xf32>, tensor<2x6x8xf32>, tensor<2x8x6xf32>) -> tensor<2x3x8xf32>
// EPKERNEL-NEXT: shard.reduce_scatter %[[Y]] on @grid grid_axes = [2] scatter_axis = 0 : tensor<2x3x8xf32> -> tensor<1x3x8xf32>
// EPKERNEL: %[[B:[0-9]+]]:5 = kiln.kernel_backward "nki_grouped_experts"(%{{.*}}, %[[GX]], %[[GW]], %[[GIDS]], %[[W1]], %[[W3]], %[[W2]]) {fqn = "layers.0.moe.experts", options = {expert_axes = [2], num_experts = 4 : i64}, {{.*}} -> (tensor<2x3x8xf32>, tensor<2x3x2xf32>, tensor<2x6x8xf32>, tensor<2x6x8xf32>, tensor<2x8x6xf32>)
// EPKERNEL-NEXT: shard.reduce_scatter %[[B]]#0 on @grid grid_axes = [2] scatter_axis = 0
// The stacks' gradients are the blocks' own: AdamW takes them as they are.
// EPKERNEL-NOT: shard.reduce_scatter %[[B]]#2
// EPKERNEL: kiln.adamw %[[W1]], %[[B]]#2,

// EP2 with the all-to-all dispatcher: each rank places its own tokens' pairs
// into a buffer [2 blocks, 6 rows, 8] (one chunk of 3 tokens x top-2, both
// of a block's experts: dropless capacity 6), and one all-to-all per tensor
// trades its block dimension for the chunks of the expert group's ranks:
// [1 block, 12 rows] on each. The experts run on their block (no partial
// sum to reduce-scatter), and their output goes back the same
// way; the backward mirrors it and reuses the received rows. The stacks'
// gradients are the blocks' own.
// A2A-LABEL: func.func @train_step(
// A2A-SAME: %[[W1:[a-z0-9]+]]: tensor<2x6x8xf32> {kiln.param = "model.layers.0.mlp.experts.*.gate_proj.weight", kiln.sharding = #kiln.sharding<[{"ep"}, {}, {}]>}
// A2A: %[[ROWS:[^,]+]], %[[RW:[^,]+]], %[[RE:[^,]+]], %[[SLOTS:[^ ]+]] = kiln.expert_dispatch {{.*}}chunks = 1 : i64{{.*}} : (tensor<1x3x8xf32>, tensor<1x3x2xf32>, tensor<1x3x2xi64>) -> (tensor<2x6x8xf32>, tensor<2x6x1xf32>, tensor<2x6x1xi64>, tensor<1x3x2xi64>)
// A2A-NEXT: %[[XR:.*]] = shard.all_to_all %[[ROWS]] on @grid grid_axes = [2] split_axis = 0 concat_axis = 1 : tensor<2x6x8xf32> -> tensor<1x12x8xf32>
// A2A-NEXT: %[[XW:.*]] = shard.all_to_all %[[RW]] on @grid grid_axes = [2] split_axis = 0 concat_axis = 1 : tensor<2x6x1xf32> -> tensor<1x12x1xf32>
// A2A-NEXT: %[[XE:.*]] = shard.all_to_all %[[RE]] on @grid grid_axes = [2] split_axis = 0 concat_axis = 1 : tensor<2x6x1xi64> -> tensor<1x12x1xi64>
// A2A-NEXT: %[[OUT:.*]] = kiln.grouped_experts %[[XR]], %[[XW]], %[[XE]], %[[W1]], {{.*}} {blocked, expert_axes = array<i16: 2>, fqn = "layers.0.moe.experts", num_experts = 4 : i64}
// A2A-NEXT: %[[BACK:.*]] = shard.all_to_all %[[OUT]] on @grid grid_axes = [2] split_axis = 1 concat_axis = 0 : tensor<1x12x8xf32> -> tensor<2x6x8xf32>
// A2A-NEXT: kiln.expert_combine %[[SLOTS]], %[[BACK]] {chunks = 1 : i64
// A2A: %[[DROWS:.*]] = kiln.expert_combine_backward %{{.*}}, %[[SLOTS]] {{.*}} -> tensor<2x6x8xf32>
// A2A-NEXT: %[[XDY:.*]] = shard.all_to_all %[[DROWS]] on @grid grid_axes = [2] split_axis = 0 concat_axis = 1
// A2A-NEXT: %[[DX:[^,]+]], %[[DW:[^,]+]], %[[DW1:[^,]+]], {{.*}} = kiln.grouped_experts_backward %[[XDY]], %[[XR]], %[[XW]], %[[XE]], %[[W1]]
// A2A-NEXT: %[[BDX:.*]] = shard.all_to_all %[[DX]] on @grid grid_axes = [2] split_axis = 1 concat_axis = 0 : tensor<1x12x8xf32> -> tensor<2x6x8xf32>
// A2A-NEXT: %[[BDW:.*]] = shard.all_to_all %[[DW]] on @grid grid_axes = [2] split_axis = 1 concat_axis = 0 : tensor<1x12x1xf32> -> tensor<2x6x1xf32>
// A2A-NEXT: kiln.expert_dispatch_backward %[[SLOTS]], %[[BDX]], %[[BDW]] {chunks = 1 : i64
// A2A-NOT: shard.reduce_scatter %[[DW1]]
// A2A: kiln.adamw %[[W1]], %[[DW1]], {{.*}} -> (tensor<2x6x8xf32>, tensor<2x6x8xf32>, tensor<2x6x8xf32>)
// One chunk for a batch split over 2 ranks: kiln-partition names the op.
// A2ACHUNKS: 'kiln.expert_dispatch' op kiln-partition: its batch splits over 2 ranks, which do not divide its 1 token chunks
