// Uneven FSDP shards under expert parallelism, FSDP over 4 ranks with the
// experts over ep 2 of them (grid [1, 2, 2, 1]). A non-expert parameter is
// split over [dp_shard, ep]: each dp_shard block is zero-padded to a
// multiple of ep, then ep splits it (the table's 6 rows: blocks of 3 padded
// to 4, 8 in all, 2 per rank). Its gradient is reduce-scattered over
// dp_shard, padded, then reduce-scattered over ep. A stack of 6 experts is
// split over ep (3 per block) and each block padded to a multiple of dp_shard
// (4, 2 per rank).
// RUN: kiln-opt %s --kiln-training --kiln-shard="dp-shard=4 ep=2" --kiln-partition | FileCheck %s
// RUN: not kiln-opt %s --kiln-training --kiln-shard="dp-shard=8 ep=2" 2>&1 | FileCheck %s --check-prefix=ODD
// ODD: kiln-shard: parameter 'model.embed_tokens.weight' has 6 rows, not divisible by the 4 ranks of dp_shard outside its expert-parallel group

func.func @loss(%ids: tensor<8x3xi64> {kiln.input = "input_ids"},
                %labels: tensor<8x3xi64> {kiln.input = "labels"},
                %table: tensor<6x8xf32> {kiln.param = "model.embed_tokens.weight"},
                %gate: tensor<6x8xf32> {kiln.param = "model.layers.0.mlp.gate.weight"},
                %w1: tensor<6x4x8xf32> {kiln.param = "model.layers.0.mlp.experts.*.gate_proj.weight"},
                %w3: tensor<6x4x8xf32> {kiln.param = "model.layers.0.mlp.experts.*.up_proj.weight"},
                %w2: tensor<6x8x4xf32> {kiln.param = "model.layers.0.mlp.experts.*.down_proj.weight"}) -> tensor<f32> {
  %h = kiln.embedding %table, %ids {fqn = "tok_embeddings"} : (tensor<6x8xf32>, tensor<8x3xi64>) -> tensor<8x3x8xf32>
  %rl = kiln.linear %h, %gate {fqn = "layers.0.moe.router.gate"} : (tensor<8x3x8xf32>, tensor<6x8xf32>) -> tensor<8x3x6xf32>
  %w, %e, %p = kiln.router %rl {norm_topk_prob, top_k = 2 : i64, fqn = "layers.0.moe.router"} : (tensor<8x3x6xf32>) -> (tensor<8x3x2xf32>, tensor<8x3x2xi64>, tensor<8x3x6xf32>)
  %y = kiln.grouped_experts %h, %w, %e, %w1, %w3, %w2 {fqn = "layers.0.moe.experts"} : (tensor<8x3x8xf32>, tensor<8x3x2xf32>, tensor<8x3x2xi64>, tensor<6x4x8xf32>, tensor<6x4x8xf32>, tensor<6x8x4xf32>) -> tensor<8x3x8xf32>
  %r = kiln.add %h, %y {fqn = "layers.0.ffn_residual"} : (tensor<8x3x8xf32>, tensor<8x3x8xf32>) -> tensor<8x3x8xf32>
  %logits = kiln.linear %r, %table {fqn = "output"} : (tensor<8x3x8xf32>, tensor<6x8xf32>) -> tensor<8x3x6xf32>
  %ce = kiln.cross_entropy %logits, %labels {fqn = "loss"} : (tensor<8x3x6xf32>, tensor<8x3xi64>) -> tensor<f32>
  return %ce : tensor<f32>
}

// CHECK-LABEL: func.func @train_step(
// CHECK-SAME: %[[TABLE:[a-z0-9]+]]: tensor<2x8xf32> {kiln.param = "model.embed_tokens.weight", kiln.sharding = #kiln.sharding<[{"dp_shard", "ep"}, {}], padded_to = [8, 0]>}
// CHECK-SAME: %[[W1:[a-z0-9]+]]: tensor<2x4x8xf32> {kiln.param = "model.layers.0.mlp.experts.*.gate_proj.weight", kiln.sharding = #kiln.sharding<[{"ep", "dp_shard"}, {}, {}], padded_to = [8, 0, 0]>}
// The table is gathered over ep (grid axis 2) into its padded dp_shard
// block, the padding dropped, then gathered over dp_shard (axis 1).
// CHECK: %[[G1:.*]] = shard.all_gather %[[TABLE]] on @grid grid_axes = [2] gather_axis = 0 : tensor<2x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT: %[[N:.*]] = kiln.narrow %[[G1]] {{.*}} : (tensor<4x8xf32>) -> tensor<3x8xf32>
// CHECK-NEXT: %[[G2:.*]] = shard.all_gather %[[N]] on @grid grid_axes = [1] gather_axis = 0 : tensor<3x8xf32> -> tensor<6x8xf32>
// CHECK-NEXT: kiln.embedding %[[G2]]
// A stack keeps its ep block: gathered over dp_shard only, its padding
// (the block's 4th expert) dropped.
// CHECK: %[[E1:.*]] = shard.all_gather %[[W1]] on @grid grid_axes = [1] gather_axis = 0 : tensor<2x4x8xf32> -> tensor<4x4x8xf32>
// CHECK-NEXT: kiln.narrow %[[E1]] {{.*}} -> tensor<3x4x8xf32>
// The tied table's gradient (the output's and the embedding's), pending
// over every rank: scattered over dp_shard into the unpadded blocks, padded,
// then scattered over ep. (The router's gate, 6 rows too, goes the same way.)
// CHECK: %[[SUM:.*]] = kiln.add %{{.*}}, %{{.*}} {fqn = "tok_embeddings.grad_accum"} : (tensor<6x8xf32>, tensor<6x8xf32>) -> tensor<6x8xf32>
// CHECK-NEXT: %[[S1:.*]] = shard.reduce_scatter %[[SUM]] on @grid grid_axes = [1] scatter_axis = 0 : tensor<6x8xf32> -> tensor<3x8xf32>
// CHECK-NEXT: %[[P:.*]] = kiln.pad %[[S1]] {{.*}} : (tensor<3x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: %[[S2:.*]] = shard.reduce_scatter %[[P]] on @grid grid_axes = [2] scatter_axis = 0 : tensor<4x8xf32> -> tensor<2x8xf32>
// CHECK: kiln.adamw %[[TABLE]], %[[S2]]
