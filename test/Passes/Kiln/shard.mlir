// kiln-shard annotates every value of the training step for FSDP2 over
// dp_shard; a second run is refused, and so are layouts it cannot place.
// RUN: kiln-opt %s --kiln-training --kiln-shard="dp-shard=2" | FileCheck %s
// RUN: kiln-opt %s --kiln-training --kiln-shard="dp-replicate=2 dp-shard=2" | FileCheck %s --check-prefix=HSDP
// RUN: not kiln-opt %s --kiln-training --kiln-shard="dp-shard=2" --kiln-shard="dp-shard=2" 2>&1 | FileCheck %s --check-prefix=TWICE
// RUN: not kiln-opt %s --kiln-training --kiln-shard="dp-shard=3" 2>&1 | FileCheck %s --check-prefix=ROWS

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
// CHECK: shard.grid @grid(shape = 1x2x1)
// Parameters and moments are stored split on dim 0, inputs on the batch.
// CHECK-LABEL: func.func @train_step(
// CHECK-SAME: tensor<16x8xf32> {kiln.param = "model.embed_tokens.weight", kiln.sharding = #kiln.sharding<[{"dp_shard"}, {}]>}
// CHECK-SAME: tensor<i64> {kiln.sharding = #kiln.sharding<[]>, kiln.state = "step"}
// CHECK-SAME: tensor<16x8xf32> {kiln.sharding = #kiln.sharding<[{"dp_shard"}, {}]>, kiln.state = "exp_avg.model.embed_tokens.weight"}
// CHECK-SAME: tensor<4x3xi64> {kiln.input = "input_ids", kiln.sharding = #kiln.sharding<[{"dp_shard"}, {}]>}
// Outputs are whole; updated state is stored as it came in.
// CHECK-SAME: tensor<f32> {kiln.output = "loss", kiln.sharding = #kiln.sharding<[]>}
// Compute follows the batch; the parameter is read whole.
// CHECK: kiln.linear {{.*}}fqn = "layers.0.feed_forward.w2", kiln.loops = {{\[}}["dp_shard"], [], [], []], {{.*}}kiln.shardings = [#kiln.sharding<[{"dp_shard"}, {}, {}]>]
// The loss over split positions is resolved whole.
// CHECK: kiln.cross_entropy {{.*}}kiln.loops = {{\[}}["dp_shard"], [], []], kiln.shardings = [#kiln.sharding<[]>]
// A weight gradient sums over the batch: pending over dp_shard, and the two
// uses of the tied table stay pending through their sum, which resolves
// into the table's storage layout for AdamW (and the norm).
// CHECK: kiln.linear_backward_weight {{.*}}fqn = "output", kiln.loops = {{\[}}["dp_shard"], [], [], []], kiln.shardings = [#kiln.sharding<[{}, {}], partial = {"dp_shard"}>]
// CHECK: kiln.embedding_backward {{.*}}kiln.shardings = [#kiln.sharding<[{}, {}], partial = {"dp_shard"}>]
// CHECK: kiln.add {{.*}}fqn = "tok_embeddings.grad_accum", kiln.loops = {{\[}}[], []], kiln.shardings = [#kiln.sharding<[{"dp_shard"}, {}]>]
// AdamW updates the stored shards.
// CHECK: kiln.adamw {{.*}}fqn = "tok_embeddings", kiln.loops = {{\[}}["dp_shard"], []], kiln.shardings = [#kiln.sharding<[{"dp_shard"}, {}]>, #kiln.sharding<[{"dp_shard"}, {}]>, #kiln.sharding<[{"dp_shard"}, {}]>]

// With replicas, the batch splits over both axes, parameters over dp_shard only.
// HSDP: shard.grid @grid(shape = 2x2x1)
// HSDP: tensor<16x8xf32> {kiln.param = "model.embed_tokens.weight", kiln.sharding = #kiln.sharding<[{"dp_shard"}, {}]>}
// HSDP: tensor<4x3xi64> {kiln.input = "input_ids", kiln.sharding = #kiln.sharding<[{"dp_replicate", "dp_shard"}, {}]>}
// HSDP: kiln.linear_backward_weight {{.*}}kiln.shardings = [#kiln.sharding<[{}, {}], partial = {"dp_replicate", "dp_shard"}>]

// TWICE: error: kiln-shard: the module is already sharded (it has 'kiln.grid_axes')
// ROWS: error: kiln-shard: input 'input_ids' has 4 rows, not divisible by the data-parallel degree 3
