// Context parallelism with CP2 (torchtitan's head-tail load balancing, its
// default): the tokens, the labels and the residual stream are split on
// their sequence over cp; parameters are FSDP-sharded over cp; attention
// attends its block of the queries to the keys and values all-gathered over
// cp (the causal mask by the true positions of the head-tail layout, which
// rope's table follows too), and their gradients are reduce-scattered back
// onto the sequence shards. The loss divides by the global positions.
// RUN: kiln-opt %s --kiln-training --kiln-shard="cp=2" --kiln-partition | FileCheck %s
// Without load balancing the sequence stays in its natural order.
// RUN: kiln-opt %s --kiln-training --kiln-shard="cp=2 cp-head-tail=false" --kiln-partition | FileCheck %s --check-prefix=NATURAL
// FSDP over dp_shard and cp together, as torchtitan's dp_shard_cp mesh.
// RUN: kiln-opt %s --kiln-training --kiln-shard="cp=2 dp-shard=2" --kiln-partition | FileCheck %s --check-prefix=FSDP
// With TP2 and sequence parallelism: the residual stream over [cp, tp], the
// heads over tp, the keys and values gathered over cp alone.
// RUN: kiln-opt %s --kiln-training --kiln-shard="cp=2 tp=2 sequence-parallel=true tp-plan=layers.*.wq=colwise,layers.*.wk=colwise,layers.*.wv=colwise,layers.*.wo=rowwise" --kiln-partition | FileCheck %s --check-prefix=TPSP
// bf16 mixed precision: the keys are cast after rope (attention's operands
// are bf16, as torchtitan's SDPA takes them), so the gathers move bf16 once
// kiln-hlo-sink-converts sinks the widening convert below them; the values
// are the wv linear's cast result already. dk and dv are reduced in float32
// (then rounded, the casts' VJPs).
// RUN: kiln-opt %s --kiln-training="param-dtype=bfloat16" --kiln-shard="cp=2" --kiln-partition \
// RUN:   | FileCheck %s --check-prefix=BF16
// RUN: kiln-opt %s --kiln-training="param-dtype=bfloat16" --kiln-shard="cp=2" --kiln-partition \
// RUN:   --kiln-lower-to-hlo=func=train_step --kiln-hlo-sink-converts --cse | FileCheck %s --check-prefix=HLO
// A sequence the degree x 2 does not divide.
// RUN: not kiln-opt %s --kiln-training --kiln-shard="cp=3" 2>&1 | FileCheck %s --check-prefix=UNEVEN
// With pp (the stages' grid, outermost, as torchtitan's mesh): cp sits
// inside each stage's ranks. kiln train's pipelined runs shard their stage
// functions on this grid (test/CLI/train-cp.test).
// RUN: kiln-opt %s --kiln-training --kiln-shard="cp=2 pp=2" | FileCheck %s --check-prefix=PP

func.func @loss(%ids: tensor<2x8xi64> {kiln.input = "input_ids"},
                %labels: tensor<2x8xi64> {kiln.input = "labels"},
                %table: tensor<16x8xf32> {kiln.param = "model.embed_tokens.weight"},
                %wq: tensor<8x8xf32> {kiln.param = "model.layers.0.self_attn.q_proj.weight"},
                %wk: tensor<4x8xf32> {kiln.param = "model.layers.0.self_attn.k_proj.weight"},
                %wv: tensor<4x8xf32> {kiln.param = "model.layers.0.self_attn.v_proj.weight"},
                %wo: tensor<8x8xf32> {kiln.param = "model.layers.0.self_attn.o_proj.weight"}) -> tensor<f32> {
  %h = kiln.embedding %table, %ids {fqn = "tok_embeddings"} : (tensor<16x8xf32>, tensor<2x8xi64>) -> tensor<2x8x8xf32>
  %cache = kiln.rope_cache {theta = 1.0e6 : f64, seq_len = 8 : i64, head_dim = 2 : i64, fqn = "rope_cache"} : tensor<8x4xf32>
  %q2 = kiln.linear %h, %wq {fqn = "layers.0.attention.wq"} : (tensor<2x8x8xf32>, tensor<8x8xf32>) -> tensor<2x8x8xf32>
  %k2 = kiln.linear %h, %wk {fqn = "layers.0.attention.wk"} : (tensor<2x8x8xf32>, tensor<4x8xf32>) -> tensor<2x8x4xf32>
  %v2 = kiln.linear %h, %wv {fqn = "layers.0.attention.wv"} : (tensor<2x8x8xf32>, tensor<4x8xf32>) -> tensor<2x8x4xf32>
  %q = kiln.reshape %q2 {fqn = "layers.0.attention.split_q", shape = array<i64: 2, 8, 4, 2>} : (tensor<2x8x8xf32>) -> tensor<2x8x4x2xf32>
  %k = kiln.reshape %k2 {fqn = "layers.0.attention.split_k", shape = array<i64: 2, 8, 2, 2>} : (tensor<2x8x4xf32>) -> tensor<2x8x2x2xf32>
  %v = kiln.reshape %v2 {fqn = "layers.0.attention.split_v", shape = array<i64: 2, 8, 2, 2>} : (tensor<2x8x4xf32>) -> tensor<2x8x2x2xf32>
  %qr, %kr = kiln.rope %q, %k, %cache {fqn = "layers.0.attention.rope"} : (tensor<2x8x4x2xf32>, tensor<2x8x2x2xf32>, tensor<8x4xf32>) -> (tensor<2x8x4x2xf32>, tensor<2x8x2x2xf32>)
  %o, %lse = kiln.attention %qr, %kr, %v {causal, scale = 0.5 : f32, fqn = "layers.0.attention.inner_attention"} : (tensor<2x8x4x2xf32>, tensor<2x8x2x2xf32>, tensor<2x8x2x2xf32>) -> (tensor<2x8x4x2xf32>, tensor<2x4x8xf32>)
  %m = kiln.reshape %o {fqn = "layers.0.attention.merge_heads", shape = array<i64: 2, 8, 8>} : (tensor<2x8x4x2xf32>) -> tensor<2x8x8xf32>
  %a = kiln.linear %m, %wo {fqn = "layers.0.attention.wo"} : (tensor<2x8x8xf32>, tensor<8x8xf32>) -> tensor<2x8x8xf32>
  %r = kiln.add %h, %a {fqn = "layers.0.attention_residual"} : (tensor<2x8x8xf32>, tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
  %logits = kiln.linear %r, %table {fqn = "output"} : (tensor<2x8x8xf32>, tensor<16x8xf32>) -> tensor<2x8x16xf32>
  %loss = kiln.cross_entropy %logits, %labels {fqn = "loss"} : (tensor<2x8x16xf32>, tensor<2x8xi64>) -> tensor<f32>
  return %loss : tensor<f32>
}

// CHECK: module attributes {kiln.grid_axes = ["dp_replicate", "dp_shard", "cp", "tp"], kiln.head_tail_chunks = 4 : i64}
// CHECK: shard.grid @grid(shape = 1x1x2x1)
// CHECK-LABEL: func.func @train_step(
// CHECK-SAME: %arg0: tensor<8x8xf32> {kiln.param = "model.embed_tokens.weight", kiln.sharding = #kiln.sharding<[{"cp"}, {}]>}
// CHECK-SAME: %arg16: tensor<2x4xi64> {kiln.input = "input_ids", kiln.sharding = #kiln.sharding<[{}, {"cp"}]>}
// CHECK-SAME: %arg17: tensor<2x4xi64> {kiln.input = "labels", kiln.sharding = #kiln.sharding<[{}, {"cp"}]>}
// CHECK: kiln.embedding %{{.*}}, %arg16 {{.*}} -> tensor<2x4x8xf32>
// CHECK: %[[CACHE:.*]] = kiln.rope_cache {{{.*}}head_tail_chunks = 4 : i64{{.*}}} : tensor<8x4xf32>
// CHECK: %[[MINE:.*]] = shard.all_slice %[[CACHE]] on @grid grid_axes = [2] slice_axis = 0 : tensor<8x4xf32> -> tensor<4x4xf32>
// CHECK: %[[Q:.*]], %[[K:.*]] = kiln.rope %{{.*}}, %{{.*}}, %[[MINE]] {{.*}} -> (tensor<2x4x4x2xf32>, tensor<2x4x2x2xf32>)
// CHECK-NEXT: %[[KALL:.*]] = shard.all_gather %[[K]] on @grid grid_axes = [2] gather_axis = 1 : tensor<2x4x2x2xf32> -> tensor<2x8x2x2xf32>
// CHECK-NEXT: %[[VALL:.*]] = shard.all_gather %{{.*}} on @grid grid_axes = [2] gather_axis = 1 : tensor<2x4x2x2xf32> -> tensor<2x8x2x2xf32>
// CHECK-NEXT: kiln.attention %[[Q]], %[[KALL]], %[[VALL]] {causal, {{.*}}head_tail_chunks = 4 : i64, {{.*}}query_axes = array<i16: 2>{{.*}} -> (tensor<2x4x4x2xf32>, tensor<2x4x4xf32>)
// CHECK: kiln.cross_entropy {{.*}}total_positions = 16 : i64{{.*}} -> tensor<f32>
// CHECK-NEXT: shard.all_reduce %{{.*}} on @grid grid_axes = [2] : tensor<f32>
// CHECK: %{{.*}}, %[[DK:.*]], %[[DV:.*]] = kiln.attention_backward %{{.*}}, %[[Q]], %[[KALL]], %[[VALL]], {{.*}}query_axes = array<i16: 2>
// CHECK-NEXT: %[[DKS:.*]] = shard.reduce_scatter %[[DK]] on @grid grid_axes = [2] scatter_axis = 1 : tensor<2x8x2x2xf32> -> tensor<2x4x2x2xf32>
// CHECK-NEXT: shard.reduce_scatter %[[DV]] on @grid grid_axes = [2] scatter_axis = 1 : tensor<2x8x2x2xf32> -> tensor<2x4x2x2xf32>
// CHECK-NEXT: kiln.rope_backward %{{.*}}, %[[DKS]], %[[MINE]]
// Each parameter's gradient is reduce-scattered over cp onto its shard.
// CHECK: %[[DT:.*]] = shard.reduce_scatter %{{.*}} on @grid grid_axes = [2] scatter_axis = 0 : tensor<16x8xf32> -> tensor<8x8xf32>
// CHECK: kiln.adamw %arg0, %[[DT]],

// NATURAL: module attributes {kiln.grid_axes = ["dp_replicate", "dp_shard", "cp", "tp"]} {
// NATURAL-LABEL: func.func @train_step(
// NATURAL-NOT: head_tail_chunks
// NATURAL: kiln.attention {{.*}}query_axes = array<i16: 2>

// FSDP: shard.grid @grid(shape = 1x2x2x1)
// FSDP-LABEL: func.func @train_step(
// FSDP-SAME: %arg0: tensor<4x8xf32> {kiln.param = "model.embed_tokens.weight", kiln.sharding = #kiln.sharding<[{"dp_shard", "cp"}, {}]>}
// FSDP-SAME: %arg16: tensor<1x4xi64> {kiln.input = "input_ids", kiln.sharding = #kiln.sharding<[{"dp_shard"}, {"cp"}]>}
// FSDP: shard.all_gather %arg0 on @grid grid_axes = [1, 2] gather_axis = 0 : tensor<4x8xf32> -> tensor<16x8xf32>

// TPSP: shard.grid @grid(shape = 1x1x2x2)
// TPSP-LABEL: func.func @train_step(
// TPSP: shard.all_gather %{{.*}} on @grid grid_axes = [2] gather_axis = 1 : tensor<2x4x1x2xf32> -> tensor<2x8x1x2xf32>
// TPSP: kiln.attention {{.*}}query_axes = array<i16: 2>{{.*}} : (tensor<2x4x2x2xf32>, tensor<2x8x1x2xf32>, tensor<2x8x1x2xf32>)
// TPSP: kiln.add {{.*}}fqn = "layers.0.attention_residual"{{.*}} -> tensor<2x2x8xf32>

// UNEVEN: kiln-shard: input 'input_ids' has a sequence of 8, not divisible by 6 (cp=3 x 2 head-tail chunks)
// PP: module attributes {kiln.grid_axes = ["pp", "dp_replicate", "dp_shard", "cp", "tp"], kiln.head_tail_chunks = 4 : i64}
// PP-NEXT: shard.grid @grid(shape = 2x1x1x2x1)

// BF16-LABEL: func.func @train_step(
// BF16: %q_out, %k_out = kiln.rope
// BF16-NEXT: %[[KB:.*]] = kiln.cast %k_out {fqn = "layers.0.attention.inner_attention", {{.*}}to = bf16}
// BF16-NEXT: %[[QB:.*]] = kiln.cast %q_out {fqn = "layers.0.attention.inner_attention", {{.*}}to = bf16}
// BF16-NEXT: %[[KALL:.*]] = shard.all_gather %[[KB]] on @grid grid_axes = [2] gather_axis = 1
// BF16-NEXT: %[[VALL:.*]] = shard.all_gather
// BF16-NEXT: kiln.attention %[[QB]], %[[KALL]], %[[VALL]]
// BF16: %q_grad, %k_grad, %v_grad = kiln.attention_backward
// BF16-NEXT: %[[DK:.*]] = shard.reduce_scatter %k_grad on @grid grid_axes = [2] scatter_axis = 1 : tensor<2x8x2x2xf32> -> tensor<2x4x2x2xf32>
// BF16: kiln.cast %[[DK]] {fqn = "layers.0.attention.inner_attention", to = bf16}

// HLO-LABEL: func.func @train_step(
// HLO: hlo.all_gather %{{.*}} {all_gather_dim = 1 : i64, replica_groups = dense<{{\[\[}}0, 1]]> : tensor<1x2xi64>} : (tensor<2x4x2x2xbf16>) -> tensor<2x8x2x2xbf16>
// HLO-NEXT: hlo.
// HLO-NEXT: hlo.all_gather %{{.*}} {all_gather_dim = 1 : i64, replica_groups = dense<{{\[\[}}0, 1]]> : tensor<1x2xi64>} : (tensor<2x4x2x2xbf16>) -> tensor<2x8x2x2xbf16>
// HLO: hlo.reduce_scatter %{{.*}} : (tensor<2x8x2x2xf32>) -> tensor<2x4x2x2xf32>
