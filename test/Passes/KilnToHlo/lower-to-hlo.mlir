// kiln-lower-to-hlo, one function per group of ops: each kiln op becomes the
// XLA instructions of its CPU kernel's math (lib/Runtime), collectives take
// replica groups from the grid (row-major, last axis fastest), kernel calls
// become custom calls, and an op without a lowering is an error naming it.
// RUN: kiln-opt %s -split-input-file --kiln-lower-to-hlo 2>&1 | FileCheck %s

// The forward: embedding as a gather, RMSNorm, linear as a dot over the
// weight's `in`, SwiGLU, residual add, reshape.
// CHECK-LABEL: func.func @train_step(
// CHECK: %[[IDS:.*]] = hlo.convert %arg1 : (tensor<2x3xi64>) -> tensor<2x3xi32>
// CHECK: hlo.gather %arg0, %[[IDS]] {collapsed_slice_dims = array<i64: 0>, index_vector_dim = 2 : i64, offset_dims = array<i64: 2>, slice_sizes = array<i64: 1, 8>, start_index_map = array<i64: 0>}
// CHECK: hlo.reduce {{.*}} {combiner = #hlo<combiner add>, dimensions = array<i64: 2>} : (tensor<2x3x8xf32>, tensor<f32>) -> tensor<2x3xf32>
// CHECK: hlo.rsqrt
// CHECK: hlo.dot_general {{.*}} {lhs_batching_dimensions = array<i64>, lhs_contracting_dimensions = array<i64: 2>, rhs_batching_dimensions = array<i64>, rhs_contracting_dimensions = array<i64: 1>} : (tensor<2x3x8xf32>, tensor<12x8xf32>) -> tensor<2x3x12xf32>
// CHECK: hlo.exp
// CHECK: hlo.reshape {{.*}} : (tensor<2x3x12xf32>) -> tensor<6x12xf32>
// CHECK-NOT: kiln.
// CHECK: return
module {
  func.func @train_step(%table: tensor<16x8xf32>, %ids: tensor<2x3xi64>, %w: tensor<8xf32>,
                        %w1: tensor<12x8xf32>) -> tensor<6x12xf32> {
    %h = kiln.embedding %table, %ids {fqn = "tok_embeddings"} : (tensor<16x8xf32>, tensor<2x3xi64>) -> tensor<2x3x8xf32>
    %n = kiln.rms_norm %h, %w {eps = 1.0e-6 : f32, fqn = "norm"} : (tensor<2x3x8xf32>, tensor<8xf32>) -> tensor<2x3x8xf32>
    %a = kiln.linear %n, %w1 {fqn = "w1"} : (tensor<2x3x8xf32>, tensor<12x8xf32>) -> tensor<2x3x12xf32>
    %s = kiln.swiglu %a, %a {fqn = "swiglu"} : (tensor<2x3x12xf32>, tensor<2x3x12xf32>) -> tensor<2x3x12xf32>
    %r = kiln.add %s, %a {fqn = "res"} : (tensor<2x3x12xf32>, tensor<2x3x12xf32>) -> tensor<2x3x12xf32>
    %o = kiln.reshape %r {fqn = "flat", shape = array<i64: 6, 12>} : (tensor<2x3x12xf32>) -> tensor<6x12xf32>
    return %o : tensor<6x12xf32>
  }
}

// -----

// Attention (GQA: 4 query heads on 2 kv heads) on [b, kv, group, s, d]: the
// causal mask from two iotas, the log-sum-exp [b, heads, s]; its backward
// recomputes the probabilities from it.
// CHECK-LABEL: func.func @train_step(
// CHECK: hlo.transpose {{.*}} {permutation = array<i64: 0, 2, 3, 1, 4>} : (tensor<1x4x2x2x8xf32>) -> tensor<1x2x2x4x8xf32>
// CHECK: hlo.dot_general {{.*}} {lhs_batching_dimensions = array<i64: 0, 1>, lhs_contracting_dimensions = array<i64: 4>, rhs_batching_dimensions = array<i64: 0, 2>, rhs_contracting_dimensions = array<i64: 3>} : (tensor<1x2x2x4x8xf32>, tensor<1x4x2x8xf32>) -> tensor<1x2x2x4x4xf32>
// CHECK: hlo.iota {iota_dimension = 0 : i64} : tensor<4x4xi32>
// CHECK: hlo.compare {{.*}} {comparison_direction = #hlo<comparison_direction GE>}
// CHECK: hlo.reduce {{.*}} {combiner = #hlo<combiner max>, dimensions = array<i64: 4>}
// CHECK: hlo.reshape {{.*}} : (tensor<1x2x2x4xf32>) -> tensor<1x4x4xf32>
// Backward: dV sums over the group and the queries.
// CHECK: hlo.dot_general {{.*}} {lhs_batching_dimensions = array<i64: 0, 1>, lhs_contracting_dimensions = array<i64: 2, 3>, rhs_batching_dimensions = array<i64: 0, 1>, rhs_contracting_dimensions = array<i64: 2, 3>} : (tensor<1x2x2x4x4xf32>, tensor<1x2x2x4x8xf32>) -> tensor<1x2x4x8xf32>
// CHECK-NOT: kiln.attention
module {
  func.func @train_step(%q: tensor<1x4x4x8xf32>, %k: tensor<1x4x2x8xf32>, %v: tensor<1x4x2x8xf32>,
                        %do: tensor<1x4x4x8xf32>)
      -> (tensor<1x4x4x8xf32>, tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>) {
    %o, %lse = kiln.attention %q, %k, %v {causal, fqn = "attn", scale = 0.35 : f32} : (tensor<1x4x4x8xf32>, tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>) -> (tensor<1x4x4x8xf32>, tensor<1x4x4xf32>)
    %dq, %dk, %dv = kiln.attention_backward %do, %q, %k, %v, %o, %lse {causal, fqn = "attn", scale = 0.35 : f32} : (tensor<1x4x4x8xf32>, tensor<1x4x4x8xf32>, tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>, tensor<1x4x4x8xf32>, tensor<1x4x4xf32>) -> (tensor<1x4x4x8xf32>, tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>)
    return %dq, %dk, %dv : tensor<1x4x4x8xf32>, tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>
  }
}

// -----

// Backward ops: the embedding gradient as a scatter-add into zeros, linear's
// two gradients as dots, RMSNorm's and SwiGLU's.
// CHECK-LABEL: func.func @train_step(
// CHECK: hlo.scatter {{.*}} {combiner = #hlo<combiner add>, index_vector_dim = 2 : i64, inserted_window_dims = array<i64: 0>, scatter_dims_to_operand_dims = array<i64: 0>, update_window_dims = array<i64: 2>} : (tensor<16x8xf32>, tensor<2x3xi32>, tensor<2x3x8xf32>) -> tensor<16x8xf32>
// CHECK: hlo.dot_general {{.*}} lhs_contracting_dimensions = array<i64: 2>{{.*}} rhs_contracting_dimensions = array<i64: 0>} : (tensor<2x3x12xf32>, tensor<12x8xf32>) -> tensor<2x3x8xf32>
// CHECK: hlo.dot_general {{.*}} lhs_contracting_dimensions = array<i64: 0, 1>{{.*}} rhs_contracting_dimensions = array<i64: 0, 1>} : (tensor<2x3x12xf32>, tensor<2x3x8xf32>) -> tensor<12x8xf32>
// CHECK: hlo.reduce {{.*}} dimensions = array<i64: 0, 1>} : (tensor<2x3x8xf32>, tensor<f32>) -> tensor<8xf32>
// CHECK-NOT: kiln.
module {
  func.func @train_step(%g: tensor<2x3x8xf32>, %ids: tensor<2x3xi64>, %dy: tensor<2x3x12xf32>,
                        %w1: tensor<12x8xf32>, %x: tensor<2x3x8xf32>, %w: tensor<8xf32>)
      -> (tensor<16x8xf32>, tensor<2x3x8xf32>, tensor<12x8xf32>, tensor<2x3x8xf32>, tensor<8xf32>,
          tensor<2x3x12xf32>) {
    %dt = kiln.embedding_backward %g, %ids {fqn = "tok_embeddings", vocab_size = 16 : i64} : (tensor<2x3x8xf32>, tensor<2x3xi64>) -> tensor<16x8xf32>
    %dx = kiln.linear_backward_data %dy, %w1 {fqn = "w1"} : (tensor<2x3x12xf32>, tensor<12x8xf32>) -> tensor<2x3x8xf32>
    %dw = kiln.linear_backward_weight %dy, %x {fqn = "w1"} : (tensor<2x3x12xf32>, tensor<2x3x8xf32>) -> tensor<12x8xf32>
    %nx, %nw = kiln.rms_norm_backward %g, %x, %w {eps = 1.0e-6 : f32, fqn = "norm"} : (tensor<2x3x8xf32>, tensor<2x3x8xf32>, tensor<8xf32>) -> (tensor<2x3x8xf32>, tensor<8xf32>)
    %dg, %du = kiln.swiglu_backward %dy, %dy, %dy {fqn = "swiglu"} : (tensor<2x3x12xf32>, tensor<2x3x12xf32>, tensor<2x3x12xf32>) -> (tensor<2x3x12xf32>, tensor<2x3x12xf32>)
    return %dt, %dx, %dw, %nx, %nw, %dg : tensor<16x8xf32>, tensor<2x3x8xf32>, tensor<12x8xf32>, tensor<2x3x8xf32>, tensor<8xf32>, tensor<2x3x12xf32>
  }
}

// -----

// Loss and optimizer: cross-entropy with a one-hot of the labels, the global
// norm, clipping, the warmup/decay schedule as selects on the step, AdamW
// with bias corrections from power, the step count plus one.
// CHECK-LABEL: func.func @train_step(
// CHECK: hlo.iota {iota_dimension = 2 : i64} : tensor<2x3x16xi32>
// CHECK: hlo.compare {{.*}} {comparison_direction = #hlo<comparison_direction EQ>}
// CHECK: hlo.sqrt
// CHECK: hlo.minimum
// CHECK: hlo.convert %arg3 : (tensor<i64>) -> tensor<f32>
// CHECK: hlo.cosine
// CHECK: hlo.select
// CHECK: hlo.power
// CHECK: hlo.add {{.*}} -> tensor<i64>
// CHECK-NOT: kiln.
module {
  func.func @train_step(%logits: tensor<2x3x16xf32>, %labels: tensor<2x3xi64>, %p: tensor<8xf32>,
                        %step: tensor<i64>) -> (tensor<f32>, tensor<2x3x16xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<i64>) {
    %loss = kiln.cross_entropy %logits, %labels {fqn = "loss"} : (tensor<2x3x16xf32>, tensor<2x3xi64>) -> tensor<f32>
    %seed = kiln.constant {fqn = "loss.seed_grad", value = dense<1.0> : tensor<f32>} : tensor<f32>
    %dl = kiln.cross_entropy_backward %logits, %labels, %seed {fqn = "loss"} : (tensor<2x3x16xf32>, tensor<2x3xi64>, tensor<f32>) -> tensor<2x3x16xf32>
    %norm = kiln.global_norm %p, %p {fqn = "optimizer.grad_norm"} : (tensor<8xf32>, tensor<8xf32>) -> tensor<f32>
    %coef = kiln.clip_coef %norm {fqn = "optimizer.clip_grad_norm", max_norm = 1.0 : f64} : (tensor<f32>) -> tensor<f32>
    %lr = kiln.lr_schedule %step {decay_steps = 10 : i64, decay_type = #kiln.decay_type<cosine>, fqn = "lr_scheduler", lr = 1.0e-3 : f64, min_lr_factor = 0.1 : f64, stable_steps = 5 : i64, warmup_steps = 2 : i64} : (tensor<i64>) -> tensor<f32>
    %p2, %m2, %v2 = kiln.adamw %p, %p, %p, %p, %step, %lr, %coef {beta1 = 0.9 : f64, beta2 = 0.95 : f64, eps = 1.0e-8 : f64, fqn = "norm", weight_decay = 0.1 : f64} : (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<i64>, tensor<f32>, tensor<f32>) -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>)
    %next = kiln.next_step %step {fqn = "optimizer.step"} : (tensor<i64>) -> tensor<i64>
    return %loss, %dl, %p2, %m2, %v2, %next : tensor<f32>, tensor<2x3x16xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<i64>
  }
}

// -----

// Collectives on a 1 x 2 x 2 grid (dp_replicate, dp_shard, tp): ranks
// 0..3 are (0, s, t) with rank = 2 s + t, so dp_shard groups {0,2},{1,3}
// and tp groups {0,1},{2,3}; every collective cross-replica (explicit groups
// of global ranks, no channel id); all_slice reads this rank's block index
// from a table at the rank parameter the pass appends (s32, kiln.rank); the
// other functions and the grid are dropped.
// CHECK: module attributes {hlo.distinct_replica_groups = 3 : i64, hlo.replica_count = 4 : i64}
// CHECK-NOT: shard.grid
// CHECK-NOT: func.func @other
// CHECK-LABEL: func.func @train_step(
// CHECK-SAME: %arg0: tensor<2x8xf32>, %[[RANK:.*]]: tensor<i32> {kiln.rank = "rank"}) -> tensor<4x2xf32>
// CHECK: hlo.all_gather %arg0 {all_gather_dim = 0 : i64, replica_groups = dense<{{\[}}[0, 2], [1, 3]]> : tensor<2x2xi64>} : (tensor<2x8xf32>) -> tensor<4x8xf32>
// CHECK: hlo.reduce_scatter {{.*}} {combiner = #hlo<combiner add>, replica_groups = dense<{{\[}}[0, 1], [2, 3]]> : tensor<2x2xi64>, scatter_dimension = 1 : i64} : (tensor<4x8xf32>) -> tensor<4x4xf32>
// CHECK: hlo.all_reduce {{.*}} {combiner = #hlo<combiner max>, replica_groups = dense<{{\[}}[0, 1, 2, 3]]> : tensor<1x4xi64>} : (tensor<4x4xf32>) -> tensor<4x4xf32>
// CHECK: %[[TABLE:.*]] = hlo.constant {value = dense<[0, 1, 0, 1]> : tensor<4xi32>} : tensor<4xi32>
// CHECK-NOT: hlo.replica_id
// CHECK: hlo.dynamic_slice %[[TABLE]], %[[RANK]] {slice_sizes = array<i64: 1>}
// CHECK: hlo.dynamic_slice {{.*}} {slice_sizes = array<i64: 4, 2>} : (tensor<4x4xf32>, tensor<i32>, tensor<i32>) -> tensor<4x2xf32>
module {
  shard.grid @grid(shape = 1x2x2)
  func.func @other(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
    return %x : tensor<2x8xf32>
  }
  func.func @train_step(%x: tensor<2x8xf32>) -> tensor<4x2xf32> {
    %g = shard.all_gather %x on @grid grid_axes = [1] gather_axis = 0 : tensor<2x8xf32> -> tensor<4x8xf32>
    %s = shard.reduce_scatter %g on @grid grid_axes = [2] scatter_axis = 1 : tensor<4x8xf32> -> tensor<4x4xf32>
    %r = shard.all_reduce %s on @grid grid_axes = [1, 2] reduction = max : tensor<4x4xf32> -> tensor<4x4xf32>
    %l = shard.all_slice %r on @grid grid_axes = [2] slice_axis = 1 : tensor<4x4xf32> -> tensor<4x2xf32>
    return %l : tensor<4x2xf32>
  }
}

// -----

// shard.all_to_all: XLA's instruction splits and joins one dimension, so
// split 1 / concat 0 moves the member blocks of dimension 1 to the front
// (reshape, transpose), exchanges them there and merges them into dimension
// 0 (member-major); split = concat is the instruction alone; over an axis of
// one rank nothing is emitted, nor counted as a replica-group list. XLA has
// no use_global_device_ids on all-to-all.
// CHECK: module attributes {hlo.distinct_replica_groups = 1 : i64, hlo.replica_count = 2 : i64}
// CHECK-LABEL: func.func @train_step(
// CHECK: %[[BLOCKS:.*]] = hlo.reshape %arg0 : (tensor<2x4xf32>) -> tensor<2x2x2xf32>
// CHECK: %[[FRONT:.*]] = hlo.transpose %[[BLOCKS]] {permutation = array<i64: 1, 0, 2>}
// CHECK: %[[X:.*]] = hlo.all_to_all %[[FRONT]] {replica_groups = dense<{{\[}}[0, 1]]> : tensor<1x2xi64>, split_dimension = 0 : i64} : (tensor<2x2x2xf32>) -> tensor<2x2x2xf32>
// CHECK: %[[A:.*]] = hlo.reshape %[[X]] : (tensor<2x2x2xf32>) -> tensor<4x2xf32>
// CHECK: %[[B:.*]] = hlo.all_to_all %arg1 {replica_groups = dense<{{\[}}[0, 1]]> : tensor<1x2xi64>, split_dimension = 0 : i64} : (tensor<4x6xf32>) -> tensor<4x6xf32>
// CHECK: return %[[A]], %[[B]], %arg1
module {
  shard.grid @grid(shape = 1x2)
  func.func @train_step(%x: tensor<2x4xf32>, %y: tensor<4x6xf32>) -> (tensor<4x2xf32>, tensor<4x6xf32>, tensor<4x6xf32>) {
    %a = shard.all_to_all %x on @grid grid_axes = [1] split_axis = 1 concat_axis = 0 : tensor<2x4xf32> -> tensor<4x2xf32>
    %b = shard.all_to_all %y on @grid grid_axes = [1] split_axis = 0 concat_axis = 0 : tensor<4x6xf32> -> tensor<4x6xf32>
    %c = shard.all_to_all %y on @grid grid_axes = [0] split_axis = 0 concat_axis = 1 : tensor<4x6xf32> -> tensor<4x6xf32>
    return %a, %b, %c : tensor<4x2xf32>, tensor<4x6xf32>, tensor<4x6xf32>
  }
}

// -----

// A kernel call on its rank's block of the experts (expert parallelism over
// grid axis 2 of [1, 1, 2, 1]): the block's first expert is its group index
// (replica-id through the table [0, 1]) times the 2 experts of a block, an
// s32 scalar. nki_grouped_experts' forward is bound to nkilib's moe_cte,
// which takes the call in its blockwise form, routed in the graph: the
// pairs' expert one-hots offset by the first expert (pairs of other blocks
// are left out), the rows' tokens from one float32 scatter-add over the
// N * B + 1 rows (12 tokens x 2 slots = 24 pairs over 2 experts in blocks of
// 256: N = 1 + ceil(23 / 256) = 2), then moe_cte(hidden [T + 1, H],
// affinities [(T + 1) * E, 1], gate_up [E, H, 2, I], down [E, I, H],
// token_position_to_id [N * B], block_to_expert [N, 1]); Kiln's result is
// its tokens' rows, the padding row cut. The first expert is no operand.
// CHECK-LABEL: func.func @train_step(
// CHECK-DAG: %[[TABLE:.*]] = hlo.constant {value = dense<[0, 1]> : tensor<2xi32>} : tensor<2xi32>
// CHECK: %[[SLOT:.*]] = hlo.dynamic_slice %[[TABLE]], {{.*}} {slice_sizes = array<i64: 1>}
// CHECK: %[[INDEX:.*]] = hlo.reshape %[[SLOT]] : (tensor<1xi32>) -> tensor<i32>
// CHECK-NEXT: %[[TWO:.*]] = hlo.constant {value = dense<2> : tensor<i32>} : tensor<i32>
// CHECK-NEXT: %[[FIRST:.*]] = hlo.multiply %[[INDEX]], %[[TWO]]
// CHECK: hlo.broadcast_in_dim %[[FIRST]] {{.*}} -> tensor<1x24x2xi32>
// CHECK: hlo.scatter {{.*}} {combiner = #hlo<combiner add>{{.*}} : (tensor<513x1xf32>, tensor<24xi32>, tensor<24x1xf32>) -> tensor<513x1xf32>
// CHECK: %[[OUT:.*]] = hlo.custom_call {{.*}} {backend_config = "{{.*}}\22kernel\22:\22nkilib.core.moe.moe_cte.moe_cte\22{{.*}}\22nki\22:{\22arguments\22:[{\22name\22:\22hidden_states\22,\22routed\22:\22hidden\22},{\22name\22:\22expert_affinities_masked\22,\22routed\22:\22affinities\22},{\22name\22:\22gate_up_proj_weight\22,\22routed\22:\22gate_up_weights\22},{\22name\22:\22down_proj_weight\22,\22routed\22:\22down_weights\22},{\22name\22:\22token_position_to_id\22,\22routed\22:\22token_positions\22},{\22name\22:\22block_to_expert\22,\22routed\22:\22block_experts\22}],\22function\22:\22moe_cte\22,\22keywords\22:{\22block_size\22:256,\22spec\22:{\22fields\22:{\22implementation\22:{\22enum\22:\22nkilib.core.moe.moe_cte.MoECTEImplementation\22,\22member\22:\22shard_on_i\22}},\22object\22:\22nkilib.core.moe.moe_cte.MoECTESpec\22}},\22module\22:\22nkilib.core.moe.moe_cte\22,\22results\22:[{\22kiln_result\22:0,\22kiln_shape\22:[4,3,8],\22layout\22:{},\22role\22:\22routed_rows\22}],\22routing\22:{\22block_size\22:256}{{.*}}"{{.*}} : (tensor<13x8xf32>, tensor<26x1xf32>, tensor<2x8x2x6xf32>, tensor<2x6x8xf32>, tensor<512xi32>, tensor<2x1xi32>) -> tensor<13x8xf32>
// CHECK: %[[ROWS:.*]] = hlo.slice %[[OUT]] {{.*}} : (tensor<13x8xf32>) -> tensor<12x8xf32>
// CHECK: hlo.reshape %[[ROWS]] : (tensor<12x8xf32>) -> tensor<4x3x8xf32>
module attributes {kiln.grid_axes = ["dp_replicate", "dp_shard", "ep", "tp"]} {
  shard.grid @grid(shape = 1x1x2x1)
  func.func @train_step(%x: tensor<4x3x8xf32>, %w: tensor<4x3x2xf32>, %ids: tensor<4x3x2xi64>,
                        %w1: tensor<2x6x8xf32>, %w3: tensor<2x6x8xf32>, %w2: tensor<2x8x6xf32>) -> tensor<4x3x8xf32> {
    %y = kiln.kernel "nki_grouped_experts"(%x, %w, %ids, %w1, %w3, %w2) {fqn = "layers.0.moe.experts", options = {expert_axes = [2], num_experts = 4 : i64}, rule = "experts", target = "kiln.grouped_experts"} : (tensor<4x3x8xf32>, tensor<4x3x2xf32>, tensor<4x3x2xi64>, tensor<2x6x8xf32>, tensor<2x6x8xf32>, tensor<2x8x6xf32>) -> tensor<4x3x8xf32>
    return %y : tensor<4x3x8xf32>
  }
}

// -----

// nki_grouped_experts' backward: nkilib's blockwise_mm_bwd takes the
// forward's activations checkpointed, which Kiln's backward (the op's
// operands and the cotangent) does not keep, so a moe_cte prologue with
// ShardOnIConfig(checkpoint_activation=True) recomputes them ([N, 2, I, B]
// and [N, B, H]: N = 3 + ceil(21 / 256) = 4 blocks of 256 for 12 tokens x 2
// slots over 4 experts); blockwise_mm_bwd then takes the six tensors of the
// form, the two checkpoints after the weights and the cotangent's rows last,
// and gives dx (the tokens' rows), each pair's affinity gradient (gathered
// at t * E + e), gate and up out of [E, H, 2, I] and down out of [E, I, H].
// CHECK-LABEL: func.func @train_step(
// CHECK: %[[CKPT:.*]]:3 = hlo.custom_call %{{.*}} {backend_config = "{{.*}}\22kernel\22:\22nkilib.core.moe.moe_cte.moe_cte\22{{.*}}\22keywords\22:{\22block_size\22:256,\22spec\22:{\22fields\22:{\22implementation\22:{\22enum\22:\22nkilib.core.moe.moe_cte.MoECTEImplementation\22,\22member\22:\22shard_on_i\22},\22shard_on_I\22:{\22fields\22:{\22checkpoint_activation\22:true},\22object\22:\22nkilib.core.moe.moe_cte.ShardOnIConfig\22}},\22object\22:\22nkilib.core.moe.moe_cte.MoECTESpec\22}}{{.*}}\22results\22:[{\22role\22:\22discarded\22},{\22role\22:\22routed\22,\22routed\22:\22gate_up_activations\22},{\22role\22:\22routed\22,\22routed\22:\22down_activations\22}]{{.*}}"{{.*}} : (tensor<13x8xf32>, tensor<52x1xf32>, tensor<4x8x2x6xf32>, tensor<4x6x8xf32>, tensor<1024xi32>, tensor<4x1xi32>) -> (tensor<13x8xf32>, tensor<4x2x6x256xf32>, tensor<4x256x8xf32>)
// CHECK: %[[G:.*]]:4 = hlo.custom_call %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[CKPT]]#1, %[[CKPT]]#2, %{{.*}}, %{{.*}}, %{{.*}} {backend_config = "{{.*}}\22kernel\22:\22nkilib.experimental.moe.bwd.blockwise_mm_backward.blockwise_mm_bwd\22{{.*}}\22name\22:\22output_hidden_states_grad\22,\22routed\22:\22output_grad\22}],\22function\22:\22blockwise_mm_bwd\22,\22keywords\22:{\22block_size\22:256}{{.*}}"{{.*}} : (tensor<13x8xf32>, tensor<52x1xf32>, tensor<4x8x2x6xf32>, tensor<4x6x8xf32>, tensor<4x2x6x256xf32>, tensor<4x256x8xf32>, tensor<1024xi32>, tensor<4x1xi32>, tensor<13x8xf32>) -> (tensor<13x8xf32>, tensor<52x1xf32>, tensor<4x8x2x6xf32>, tensor<4x6x8xf32>)
// CHECK-DAG: hlo.slice %[[G]]#0 {{.*}} : (tensor<13x8xf32>) -> tensor<12x8xf32>
// CHECK-DAG: hlo.gather %[[G]]#1, {{.*}} : (tensor<52x1xf32>, tensor<24xi32>) -> tensor<24x1xf32>
// CHECK-DAG: hlo.slice %[[G]]#2 {{.*}} : (tensor<4x8x2x6xf32>) -> tensor<4x8x1x6xf32>
// CHECK-DAG: hlo.transpose %[[G]]#3 {{.*}} : (tensor<4x6x8xf32>) -> tensor<4x8x6xf32>
module {
  func.func @train_step(%dy: tensor<4x3x8xf32>, %x: tensor<4x3x8xf32>, %w: tensor<4x3x2xf32>,
                        %ids: tensor<4x3x2xi64>, %w1: tensor<4x6x8xf32>, %w3: tensor<4x6x8xf32>,
                        %w2: tensor<4x8x6xf32>)
      -> (tensor<4x3x8xf32>, tensor<4x3x2xf32>, tensor<4x6x8xf32>, tensor<4x6x8xf32>, tensor<4x8x6xf32>) {
    %dx, %dw, %d1, %d3, %d2 = kiln.kernel_backward "nki_grouped_experts"(%dy, %x, %w, %ids, %w1, %w3, %w2) {fqn = "layers.0.moe.experts", options = {}, rule = "experts", target = "kiln.grouped_experts"} : (tensor<4x3x8xf32>, tensor<4x3x8xf32>, tensor<4x3x2xf32>, tensor<4x3x2xi64>, tensor<4x6x8xf32>, tensor<4x6x8xf32>, tensor<4x8x6xf32>) -> (tensor<4x3x8xf32>, tensor<4x3x2xf32>, tensor<4x6x8xf32>, tensor<4x6x8xf32>, tensor<4x8x6xf32>)
    return %dx, %dw, %d1, %d3, %d2 : tensor<4x3x8xf32>, tensor<4x3x2xf32>, tensor<4x6x8xf32>, tensor<4x6x8xf32>, tensor<4x8x6xf32>
  }
}

// -----

// A substituted kernel is a custom call to AwsNeuronCustomNativeKernel whose
// backend_config names the NKI kernel, Kiln's kernel and direction, its rule,
// module and options (also as MLIR text, for Kiln's HLO evaluator). nki_rope
// is bound to the NKI Library's rope_hf(q, k, q_out, k_out, rope_cache=,
// backward=): the call passes q, k, zero buffers for q_out and k_out (which
// the results alias) and the cache, and says which operands are Kiln's.
// CHECK-LABEL: func.func @train_step(
// CHECK: %[[QBUF:.*]] = hlo.broadcast_in_dim %{{.*}} : (tensor<f32>) -> tensor<1x2x4x8xf32>
// CHECK: %[[KBUF:.*]] = hlo.broadcast_in_dim %{{.*}} : (tensor<f32>) -> tensor<1x1x4x8xf32>
// CHECK: hlo.custom_call %arg0, %arg1, %[[QBUF]], %[[KBUF]], %arg2 {backend_config = "{\22fqn\22:\22layers.0.attention.rope\22,\22kernel\22:\22nkilib.core.embeddings.rope_hf.rope_hf\22,\22kiln_direction\22:\22forward\22,\22kiln_kernel\22:\22nki_rope\22,\22kiln_options\22:\22{}\22,
// CHECK-SAME: \22nki\22:{\22arguments\22:[{\22kiln_operand\22:0,\22kiln_shape\22:[1,2,4,8],\22layout\22:{},\22name\22:\22q\22},{\22kiln_operand\22:1,\22kiln_shape\22:[1,1,4,8],\22layout\22:{},\22name\22:\22k\22},{\22kiln_shape\22:[1,2,4,8],\22layout\22:{},\22name\22:\22q_out\22,\22output_of_result\22:0},{\22kiln_shape\22:[1,1,4,8],\22layout\22:{},\22name\22:\22k_out\22,\22output_of_result\22:1},{\22kiln_operand\22:2,\22kiln_shape\22:[4,16],\22layout\22:{},\22name\22:\22rope_cache\22}],\22function\22:\22rope_hf\22,\22keywords\22:{\22backward\22:false},\22module\22:\22nkilib.core.embeddings.rope_hf\22,\22results\22:[],
// CHECK-SAME: \22options\22:{},\22rule\22:\22rope\22}", call_target_name = "AwsNeuronCustomNativeKernel", output_operand_aliases = array<i64: 2, 3>}
// CHECK: hlo.custom_call %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %arg2 {{.*}}\22kiln_direction\22:\22backward\22{{.*}}\22keywords\22:{\22backward\22:true}{{.*}}output_operand_aliases = array<i64: 2, 3>
module {
  func.func @train_step(%q: tensor<1x2x4x8xf32>, %k: tensor<1x1x4x8xf32>, %cache: tensor<4x16xf32>)
      -> (tensor<1x2x4x8xf32>, tensor<1x1x4x8xf32>) {
    %qo, %ko = kiln.kernel "nki_rope"(%q, %k, %cache) {fqn = "layers.0.attention.rope", options = {}, rule = "rope", target = "kiln.rope"} : (tensor<1x2x4x8xf32>, tensor<1x1x4x8xf32>, tensor<4x16xf32>) -> (tensor<1x2x4x8xf32>, tensor<1x1x4x8xf32>)
    %dq, %dk = kiln.kernel_backward "nki_rope"(%qo, %ko, %cache) {fqn = "layers.0.attention.rope", options = {}, rule = "rope", target = "kiln.rope"} : (tensor<1x2x4x8xf32>, tensor<1x1x4x8xf32>, tensor<4x16xf32>) -> (tensor<1x2x4x8xf32>, tensor<1x1x4x8xf32>)
    return %dq, %dk : tensor<1x2x4x8xf32>, tensor<1x1x4x8xf32>
  }
}

// -----

// nki_flash_attention is bound to attention_cte and attention_bwd, which take
// other layouts: the forward folds heads into the batch (q [b*h, s, d], k
// [b*hk, d, s], v [b*hk, s, d]) and returns the output and its softmax
// statistics [b*h, 128, s/128], from which lse = -neg_max - log(sum_recip)
// ([p, g] is row g*128 + p); the backward takes [b, h, d, s] tensors and
// lse as [b, h, 128, s/128]. Keywords fix the forms the kernel implements
// and take the scale from the call's options.
// CHECK-LABEL: func.func @train_step(
// CHECK-DAG: %[[Q:.*]] = hlo.reshape %arg0 : (tensor<1x2x256x8xf32>) -> tensor<2x256x8xf32>
// CHECK-DAG: %[[KT:.*]] = hlo.transpose %arg1 {permutation = array<i64: 0, 1, 3, 2>} : (tensor<1x1x256x8xf32>) -> tensor<1x1x8x256xf32>
// CHECK-DAG: %[[K:.*]] = hlo.reshape %[[KT]] : (tensor<1x1x8x256xf32>) -> tensor<1x8x256xf32>
// CHECK-DAG: %[[V:.*]] = hlo.reshape %arg2 : (tensor<1x1x256x8xf32>) -> tensor<1x256x8xf32>
// CHECK: %[[F:.*]]:3 = hlo.custom_call %[[Q]], %[[K]], %[[V]] {backend_config = "{{.*}}\22kernel\22:\22nkilib.core.attention.attention_cte.attention_cte\22{{.*}}\22keywords\22:{\22cache_softmax\22:true,\22causal_mask\22:true,\22scale\22:0.35355{{[0-9]*}},\22tp_k\22:false,\22tp_out\22:false,\22tp_q\22:true}{{.*}}"{{.*}} : (tensor<2x256x8xf32>, tensor<1x8x256xf32>, tensor<1x256x8xf32>) -> (tensor<2x256x8xf32>, tensor<2x128x2xf32>, tensor<2x128x2xf32>)
// CHECK: %[[NEG:.*]] = hlo.negate %[[F]]#1
// CHECK: %[[LOG:.*]] = hlo.log %[[F]]#2
// CHECK: %[[LSE:.*]] = hlo.subtract %[[NEG]], %[[LOG]]
// CHECK: %[[TILES:.*]] = hlo.reshape %[[LSE]] : (tensor<2x128x2xf32>) -> tensor<1x2x128x2xf32>
// CHECK: %[[ROWS:.*]] = hlo.transpose %[[TILES]] {permutation = array<i64: 0, 1, 3, 2>} : (tensor<1x2x128x2xf32>) -> tensor<1x2x2x128xf32>
// CHECK: hlo.reshape %[[ROWS]] : (tensor<1x2x2x128xf32>) -> tensor<1x2x256xf32>
// CHECK: hlo.custom_call {{.*}}\22kernel\22:\22nkilib.core.attention.attention_bwd.attention_bwd\22{{.*}}\22keywords\22:{\22mixed_precision\22:true,\22softmax_scale\22:0.35355{{[0-9]*}},\22use_causal_mask\22:true}{{.*}} : (tensor<1x2x8x256xf32>, tensor<1x1x8x256xf32>, tensor<1x1x8x256xf32>, tensor<1x2x8x256xf32>, tensor<1x2x8x256xf32>, tensor<1x2x128x2xf32>) -> (tensor<1x2x8x256xf32>, tensor<1x1x8x256xf32>, tensor<1x1x8x256xf32>)
module {
  func.func @train_step(%q: tensor<1x2x256x8xf32>, %k: tensor<1x1x256x8xf32>, %v: tensor<1x1x256x8xf32>)
      -> (tensor<1x2x256x8xf32>, tensor<1x1x256x8xf32>, tensor<1x1x256x8xf32>) {
    %o, %lse = kiln.kernel "nki_flash_attention"(%q, %k, %v) {fqn = "layers.0.attention.inner_attention", options = {causal = true, scale = 0.353553385 : f32}, rule = "flash", target = "kiln.attention"} : (tensor<1x2x256x8xf32>, tensor<1x1x256x8xf32>, tensor<1x1x256x8xf32>) -> (tensor<1x2x256x8xf32>, tensor<1x2x256xf32>)
    %dq, %dk, %dv = kiln.kernel_backward "nki_flash_attention"(%o, %q, %k, %v, %o, %lse) {fqn = "layers.0.attention.inner_attention", options = {causal = true, scale = 0.353553385 : f32}, rule = "flash", target = "kiln.attention"} : (tensor<1x2x256x8xf32>, tensor<1x2x256x8xf32>, tensor<1x1x256x8xf32>, tensor<1x1x256x8xf32>, tensor<1x2x256x8xf32>, tensor<1x2x256xf32>) -> (tensor<1x2x256x8xf32>, tensor<1x1x256x8xf32>, tensor<1x1x256x8xf32>)
    return %dq, %dk, %dv : tensor<1x2x256x8xf32>, tensor<1x1x256x8xf32>, tensor<1x1x256x8xf32>
  }
}


// -----

// A second all-gather of the same shard over the same axes (FSDP's gather
// for the backward) reads it through an opt-barrier with the value computed
// before it: without channel ids the two gathers are otherwise identical and
// CSE would merge them, keeping the parameter gathered through the step. A
// gather over other axes is a different collective.
// CHECK-LABEL: func.func @train_step(
// CHECK: %[[FWD:.*]] = hlo.all_gather %arg0 {all_gather_dim = 0 : i64, replica_groups = dense<{{\[}}[0, 1]]> : tensor<1x2xi64>}
// CHECK: %[[Y:.*]] = hlo.add %[[FWD]], %[[FWD]]
// CHECK: %[[HELD:.*]]:2 = hlo.opt_barrier %arg0, %[[Y]] : (tensor<2x8xf32>, tensor<4x8xf32>) -> (tensor<2x8xf32>, tensor<4x8xf32>)
// CHECK: %[[BWD:.*]] = hlo.all_gather %[[HELD]]#0 {all_gather_dim = 0 : i64, replica_groups = dense<{{\[}}[0, 1]]> : tensor<1x2xi64>}
// CHECK: hlo.add %[[Y]], %[[BWD]]
module {
  shard.grid @grid(shape = 2)
  func.func @train_step(%x: tensor<2x8xf32>) -> tensor<4x8xf32> {
    %g = shard.all_gather %x on @grid grid_axes = [0] gather_axis = 0 : tensor<2x8xf32> -> tensor<4x8xf32>
    %y = kiln.add %g, %g {fqn = "y"} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %g2 = shard.all_gather %x on @grid grid_axes = [0] gather_axis = 0 : tensor<2x8xf32> -> tensor<4x8xf32>
    %z = kiln.add %y, %g2 {fqn = "z"} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    return %z : tensor<4x8xf32>
  }
}
