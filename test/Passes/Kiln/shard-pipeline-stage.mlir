// FSDP inside a pipeline stage: kiln-shard and kiln-partition take a stage's
// forward-and-backward (@loss_stage<s>_grad, kiln-autodiff pipeline-stages)
// as they take @train_step. What it receives from the previous stage
// (kiln.transfer) and the next (kiln.cotangent) is split on its batch
// dimension like the data inputs, and so is what it sends; its gradients
// (kiln.grad results) are stored as their parameters are, so each is
// reduce-scattered. kiln-stage-forward-backward then cuts the partitioned
// stage: the forward all-gathers the parameters it reads, the backward
// gathers them again (FSDP2's reshard after forward) and scatters the
// gradients.
// RUN: kiln-opt %s --kiln-pipeline-split=stage-starts=layers.1 --kiln-autodiff=pipeline-stages=1 --kiln-shard="func=loss_stage0_grad dp-shard=2" --kiln-partition=func=loss_stage0_grad | FileCheck %s --check-prefix=STAGE0
// RUN: kiln-opt %s --kiln-pipeline-split=stage-starts=layers.1 --kiln-autodiff=pipeline-stages=1 --kiln-shard="func=loss_stage1_grad dp-shard=2" --kiln-partition=func=loss_stage1_grad | FileCheck %s --check-prefix=STAGE1
// RUN: kiln-opt %s --kiln-pipeline-split=stage-starts=layers.1 --kiln-autodiff=pipeline-stages=1 --kiln-shard="func=loss_stage1_grad dp-shard=2" --kiln-partition=func=loss_stage1_grad --kiln-stage-forward-backward | FileCheck %s --check-prefix=SPLIT
// Every stage at once on the run's grid: stages=1 shards and partitions each
// @loss_stage<s>_grad, pp=2 puts the pipeline's axis first, unused by the
// stages (each pipeline rank's collectives stay among its own ranks), and
// the pipeline update's gradient norm sums each rank's shards' squares
// over dp_shard as well as over pp.
// RUN: kiln-opt %s --kiln-pipeline-split=stage-starts=layers.1 --kiln-autodiff=pipeline-stages=1 --kiln-shard="stages=1 pp=2 dp-shard=2" --kiln-partition=stages=1 --kiln-stage-forward-backward --kiln-optimizer="pipeline-degree=2 pipeline-rank=1 microbatches=2" | FileCheck %s --check-prefix=ALL
// TP with sequence parallelism inside the stages: the tied table splits
// rowwise on its vocabulary in both stages, as the first (its embedding)
// places it, so both pipeline ranks store it alike; what crosses stages is
// the residual stream split on its sequence over tp, as the stages hold it;
// and the update sums the squares of gradients split over tp (down_proj's)
// over pp and tp, those replicated over tp (the norm's) over pp alone.
// RUN: kiln-opt %s --kiln-pipeline-split=stage-starts=layers.1 --kiln-autodiff=pipeline-stages=1 --kiln-shard="stages=1 pp=2 tp=2 sequence-parallel=1 tp-plan=tok_embeddings=rowwise,layers.*.feed_forward.w2=rowwise" --kiln-partition=stages=1 --kiln-stage-forward-backward --kiln-optimizer="pipeline-degree=2 pipeline-rank=1 microbatches=2" | FileCheck %s --check-prefix=TP
// RUN: not kiln-opt %s --kiln-shard=stages=1 2>&1 | FileCheck %s --check-prefix=NOSTAGES
// RUN: not kiln-opt %s --kiln-partition=stages=1 2>&1 | FileCheck %s --check-prefix=NOSTAGES2

// pipeline-split.mlir's tied toy at 2 rows, one for each dp_shard rank.
func.func @loss(%ids: tensor<2x2xi64> {kiln.input = "input_ids"},
                %labels: tensor<2x2xi64> {kiln.input = "labels"},
                %table: tensor<8x4xf32> {kiln.param = "model.embed_tokens.weight"},
                %w0: tensor<4x4xf32> {kiln.param = "model.layers.0.mlp.down_proj.weight"},
                %w1: tensor<4x4xf32> {kiln.param = "model.layers.1.mlp.down_proj.weight"},
                %norm: tensor<4xf32> {kiln.param = "model.norm.weight"}) -> tensor<f32> {
  %t = kiln.cast %table {fqn = "tok_embeddings", to = bf16} : (tensor<8x4xf32>) -> tensor<8x4xf32>
  %h = kiln.embedding %t, %ids {fqn = "tok_embeddings"} : (tensor<8x4xf32>, tensor<2x2xi64>) -> tensor<2x2x4xf32>
  %d0 = kiln.linear %h, %w0 {fqn = "layers.0.feed_forward.w2"} : (tensor<2x2x4xf32>, tensor<4x4xf32>) -> tensor<2x2x4xf32>
  %r0 = kiln.add %h, %d0 {fqn = "layers.0.ffn_residual"} : (tensor<2x2x4xf32>, tensor<2x2x4xf32>) -> tensor<2x2x4xf32>
  %d1 = kiln.linear %r0, %w1 {fqn = "layers.1.feed_forward.w2"} : (tensor<2x2x4xf32>, tensor<4x4xf32>) -> tensor<2x2x4xf32>
  %r1 = kiln.add %r0, %d1 {fqn = "layers.1.ffn_residual"} : (tensor<2x2x4xf32>, tensor<2x2x4xf32>) -> tensor<2x2x4xf32>
  %s = kiln.add %r1, %h {fqn = "norm.skip"} : (tensor<2x2x4xf32>, tensor<2x2x4xf32>) -> tensor<2x2x4xf32>
  %n = kiln.rms_norm %s, %norm {eps = 1.0e-6 : f32, fqn = "norm"} : (tensor<2x2x4xf32>, tensor<4xf32>) -> tensor<2x2x4xf32>
  %logits = kiln.linear %n, %t {fqn = "output"} : (tensor<2x2x4xf32>, tensor<8x4xf32>) -> tensor<2x2x8xf32>
  %loss = kiln.cross_entropy %logits, %labels {fqn = "loss"} : (tensor<2x2x8xf32>, tensor<2x2xi64>) -> tensor<f32>
  return %loss : tensor<f32>
}

// Stage 0 takes its row of the token ids and its half of each parameter;
// the cotangents of the two values it sends come back split as it sent
// them.
// STAGE0-LABEL: func.func @loss_stage0_grad(
// STAGE0-SAME: %[[IDS:.*]]: tensor<1x2xi64> {kiln.input = "input_ids", kiln.sharding = #kiln.sharding<[{"dp_shard"}, {}]>}
// STAGE0-SAME: %[[TABLE:.*]]: tensor<4x4xf32> {kiln.param = "model.embed_tokens.weight", kiln.sharding = #kiln.sharding<[{"dp_shard"}, {}]>}
// STAGE0-SAME: %[[W0:.*]]: tensor<2x4xf32> {kiln.param = "model.layers.0.mlp.down_proj.weight", kiln.sharding = #kiln.sharding<[{"dp_shard"}, {}]>}
// STAGE0-SAME: %{{.*}}: tensor<1x2x4xf32> {kiln.cotangent = 0 : i64, kiln.sharding = #kiln.sharding<[{"dp_shard"}, {}, {}]>}
// STAGE0-SAME: %{{.*}}: tensor<1x2x4xf32> {kiln.cotangent = 1 : i64, kiln.sharding = #kiln.sharding<[{"dp_shard"}, {}, {}]>}
// STAGE0-SAME: -> (tensor<1x2x4xf32> {kiln.sharding = #kiln.sharding<[{"dp_shard"}, {}, {}]>, kiln.transfer = 0 : i64}, tensor<1x2x4xf32> {kiln.sharding = #kiln.sharding<[{"dp_shard"}, {}, {}]>, kiln.transfer = 1 : i64}, tensor<4x4xf32> {kiln.grad = "model.embed_tokens.weight", kiln.sharding = #kiln.sharding<[{"dp_shard"}, {}]>}, tensor<2x4xf32> {kiln.grad = "model.layers.0.mlp.down_proj.weight", kiln.sharding = #kiln.sharding<[{"dp_shard"}, {}]>})
// STAGE0-SAME: attributes {kiln.stage = 0 : i64}
// STAGE0: shard.all_gather %[[TABLE]] on @grid grid_axes = [1] gather_axis = 0 : tensor<4x4xf32> -> tensor<8x4xf32>
// STAGE0: kiln.embedding {{.*}} : (tensor<8x4xf32>, tensor<1x2xi64>) -> tensor<1x2x4xf32>
// STAGE0: shard.all_gather %[[W0]] on @grid grid_axes = [1] gather_axis = 0 : tensor<2x4xf32> -> tensor<4x4xf32>
// STAGE0: %[[GW0:.*]] = shard.reduce_scatter %{{.*}} on @grid grid_axes = [1] scatter_axis = 0 : tensor<4x4xf32> -> tensor<2x4xf32>
// STAGE0: kiln.embedding_backward {{.*}} -> tensor<8x4xf32>
// STAGE0: %[[GTABLE:.*]] = shard.reduce_scatter %{{.*}} on @grid grid_axes = [1] scatter_axis = 0 : tensor<8x4xf32> -> tensor<4x4xf32>
// STAGE0: return %{{.*}}, %{{.*}}, %[[GTABLE]], %[[GW0]] :

// The last stage: its loss is the mean over both ranks' positions (4),
// all-reduced; the cotangents it returns stay split.
// STAGE1-LABEL: func.func @loss_stage1_grad(
// STAGE1-SAME: tensor<1x2x4xf32> {kiln.sharding = #kiln.sharding<[{"dp_shard"}, {}, {}]>, kiln.transfer = 0 : i64}
// STAGE1-SAME: tensor<1x2x4xf32> {kiln.sharding = #kiln.sharding<[{"dp_shard"}, {}, {}]>, kiln.transfer = 1 : i64}
// STAGE1-SAME: -> (tensor<f32> {kiln.output = "loss", kiln.sharding = #kiln.sharding<[]>}, tensor<4x4xf32> {kiln.grad = "model.embed_tokens.weight"
// STAGE1-SAME: tensor<2x4xf32> {kiln.grad = "model.layers.1.mlp.down_proj.weight"
// STAGE1-SAME: tensor<2xf32> {kiln.grad = "model.norm.weight"
// STAGE1-SAME: tensor<1x2x4xf32> {kiln.cotangent = 0 : i64, kiln.sharding = #kiln.sharding<[{"dp_shard"}, {}, {}]>}
// STAGE1: %[[LOSS:.*]] = kiln.cross_entropy {{.*}}total_positions = 4 : i64
// STAGE1: %[[MEAN:.*]] = shard.all_reduce %[[LOSS]] on @grid grid_axes = [1]
// STAGE1: return %[[MEAN]],

// Cut: the forward gathers the stage's three parameters and keeps its
// local activations; the backward gathers each again where it reads it and
// scatters the three gradients.
// SPLIT-LABEL: func.func @loss_stage1_forward(
// SPLIT-SAME: attributes {kiln.stage = 1 : i64}
// SPLIT-COUNT-3: shard.all_gather
// SPLIT-NOT: shard.reduce_scatter
// SPLIT: shard.all_reduce
// SPLIT-LABEL: func.func @loss_stage1_backward(
// SPLIT-NOT: kiln.linear %
// SPLIT: shard.all_gather {{.*}} : tensor<4x4xf32> -> tensor<8x4xf32>
// SPLIT: shard.all_gather {{.*}} : tensor<2xf32> -> tensor<4xf32>
// SPLIT: shard.reduce_scatter {{.*}} : tensor<4xf32> -> tensor<2xf32>
// SPLIT: shard.all_gather {{.*}} : tensor<2x4xf32> -> tensor<4x4xf32>
// SPLIT: shard.reduce_scatter {{.*}} : tensor<4x4xf32> -> tensor<2x4xf32>
// SPLIT: shard.reduce_scatter {{.*}} : tensor<8x4xf32> -> tensor<4x4xf32>
// SPLIT-NOT: shard.
// SPLIT: return

// ALL: module attributes {kiln.grid_axes = ["pp", "dp_replicate", "dp_shard", "tp"]}
// ALL: shard.grid @grid(shape = 2x1x2x1)
// ALL-LABEL: func.func @loss_stage0_forward(
// ALL: shard.all_gather {{.*}} grid_axes = [2] gather_axis = 0 : tensor<4x4xf32> -> tensor<8x4xf32>
// ALL-LABEL: func.func @loss_stage1_backward(
// ALL: shard.reduce_scatter {{.*}} grid_axes = [2] scatter_axis = 0 : tensor<8x4xf32> -> tensor<4x4xf32>
// Rank 1 updates the shards it holds: the table (its first stage is rank
// 0's, so its squares are rank 0's), the layer's and the norm's, each (and
// its moments and gradient) stored as the stages store it.
// ALL-LABEL: func.func @train_step(
// ALL-SAME: tensor<4x4xf32> {kiln.param = "model.embed_tokens.weight", kiln.sharding = #kiln.sharding<[{"dp_shard"}, {}]>}, %{{.*}}: tensor<2x4xf32> {kiln.param = "model.layers.1.mlp.down_proj.weight", kiln.sharding = #kiln.sharding<[{"dp_shard"}, {}]>}, %{{.*}}: tensor<2xf32> {kiln.param = "model.norm.weight", kiln.sharding = #kiln.sharding<[{"dp_shard"}]>}
// ALL-SAME: tensor<2xf32> {kiln.sharding = #kiln.sharding<[{"dp_shard"}]>, kiln.state = "exp_avg.model.norm.weight"}
// ALL-SAME: tensor<2xf32> {kiln.grad = "model.norm.weight", kiln.sharding = #kiln.sharding<[{"dp_shard"}]>}
// ALL-SAME: -> (tensor<4x4xf32> {kiln.param = "model.embed_tokens.weight", kiln.sharding = #kiln.sharding<[{"dp_shard"}, {}]>}
// ALL: %[[SQ:.*]] = kiln.global_norm %{{.*}}, %{{.*}} {fqn = "optimizer.grad_norm", squared} : (tensor<2x4xf32>, tensor<2xf32>) -> tensor<f32>
// ALL: shard.all_reduce %[[SQ]] on @grid grid_axes = [0, 2]

// NOSTAGES: error: kiln-shard: stages=1 but no pipeline stage's @..._grad (run kiln-autodiff pipeline-stages first)
// NOSTAGES2: error: kiln-partition: no function @train_step (stages=1: no pipeline stage's @..._grad)

// TP-LABEL: func.func @loss_stage0_forward(
// TP-SAME: tensor<4x4xf32> {kiln.param = "model.embed_tokens.weight", kiln.sharding = #kiln.sharding<[{"tp"}, {}]>}
// TP-SAME: -> (tensor<2x1x4xf32> {kiln.sharding = #kiln.sharding<[{}, {"tp"}, {}]>, kiln.transfer = 0 : i64}, tensor<2x1x4xf32> {kiln.sharding = #kiln.sharding<[{}, {"tp"}, {}]>, kiln.transfer = 1 : i64}
// TP-LABEL: func.func @loss_stage1_forward(
// TP-SAME: tensor<2x1x4xf32> {kiln.sharding = #kiln.sharding<[{}, {"tp"}, {}]>, kiln.transfer = 0 : i64}
// TP-SAME: tensor<4x4xf32> {kiln.param = "model.embed_tokens.weight", kiln.sharding = #kiln.sharding<[{"tp"}, {}]>}
// TP-LABEL: func.func @train_step(
// TP-SAME: %[[TABLE:[a-z0-9]+]]: tensor<4x4xf32> {kiln.param = "model.embed_tokens.weight", kiln.sharding = #kiln.sharding<[{"tp"}, {}]>}
// TP-SAME: %[[GW1:[a-z0-9]+]]: tensor<4x2xf32> {kiln.grad = "model.layers.1.mlp.down_proj.weight", kiln.sharding = #kiln.sharding<[{}, {"tp"}]>}
// TP-SAME: %[[GNORM:[a-z0-9]+]]: tensor<4xf32> {kiln.grad = "model.norm.weight", kiln.sharding = #kiln.sharding<[{}]>}
// TP: %[[SQ0:.*]] = kiln.global_norm %[[GNORM]] {{.*}}squared
// TP: %[[R0:.*]] = shard.all_reduce %[[SQ0]] on @grid grid_axes = [0] :
// TP: %[[SQ1:.*]] = kiln.global_norm %[[GW1]] {{.*}}squared
// TP: %[[R1:.*]] = shard.all_reduce %[[SQ1]] on @grid grid_axes = [0, 3] :
// TP: kiln.add %[[R0]], %[[R1]]
