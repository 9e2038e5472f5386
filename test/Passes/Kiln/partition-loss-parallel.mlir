// Vocabulary-parallel embedding and loss parallel (torchtitan's Qwen3 plan:
// tok_embeddings rowwise, output colwise) with TP2: each rank holds 8 of the
// 16 vocabulary rows; the [tokens, vocab] logits are never gathered.
// RUN: kiln-opt %s --kiln-training --kiln-shard="tp=2 sequence-parallel=false tp-plan=tok_embeddings=rowwise,output=colwise" --kiln-partition | FileCheck %s
// No tensor of the whole vocabulary (logits [2, 4, 16], the table [16, 8] or
// its gradient) exists in the per-rank step.
// RUN: kiln-opt %s --kiln-training --kiln-shard="tp=2 sequence-parallel=false tp-plan=tok_embeddings=rowwise,output=colwise" --kiln-partition \
// RUN:   | sed -n '/func.func @train_step/,$p' | not grep -E "tensor<(2x4x16|16x8)xf32>"
// With sequence parallelism the embedding's partial output is scattered into
// the sequence-split stream, and its gradient is taken from the gathered
// sequence on the rank's vocabulary shard.
// RUN: kiln-opt %s --kiln-training --kiln-shard="tp=2 sequence-parallel=true tp-plan=tok_embeddings=rowwise,output=colwise" --kiln-partition | FileCheck %s --check-prefix=SP
// Under FSDP2 x TP2 the tables are [vocab/tp/dp, hidden] and the gradients of
// the vocabulary shard are reduce-scattered over dp_shard.
// RUN: kiln-opt %s --kiln-training --kiln-shard="dp-shard=2 tp=2 sequence-parallel=true tp-plan=tok_embeddings=rowwise,output=colwise" --kiln-partition | FileCheck %s --check-prefix=FSDP
// A tied table (one parameter read by the embedding and the output) splits alike.
// RUN: kiln-opt %S/Inputs/tied-loss.mlir --kiln-training --kiln-shard="tp=2 tp-plan=tok_embeddings=rowwise" --kiln-partition | FileCheck %s --check-prefix=TIED
// A forward-only @loss (validation) partitions alike: its parameters are
// stored as the training step stores them, its loss is loss parallel.
// RUN: kiln-opt %s --kiln-shard="func=loss tp=2 dp-shard=2 tp-plan=tok_embeddings=rowwise,output=colwise" --kiln-partition="func=loss" | FileCheck %s --check-prefix=EVAL
// torchtitan splits an embedding colwise on its features.
// RUN: kiln-opt %s --kiln-training --kiln-shard="tp=2 sequence-parallel=false tp-plan=tok_embeddings=colwise" --kiln-partition | FileCheck %s --check-prefix=COLWISE

func.func @loss(%ids: tensor<2x4xi64> {kiln.input = "input_ids"},
                %labels: tensor<2x4xi64> {kiln.input = "labels"},
                %table: tensor<16x8xf32> {kiln.param = "model.embed_tokens.weight"},
                %norm: tensor<8xf32> {kiln.param = "model.norm.weight"},
                %out: tensor<16x8xf32> {kiln.param = "lm_head.weight"}) -> tensor<f32> {
  %h = kiln.embedding %table, %ids {fqn = "tok_embeddings"} : (tensor<16x8xf32>, tensor<2x4xi64>) -> tensor<2x4x8xf32>
  %n = kiln.rms_norm %h, %norm {eps = 1.0e-6 : f32, fqn = "norm"} : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %logits = kiln.linear %n, %out {fqn = "output"} : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
  %loss = kiln.cross_entropy %logits, %labels {fqn = "loss"} : (tensor<2x4x16xf32>, tensor<2x4xi64>) -> tensor<f32>
  return %loss : tensor<f32>
}

// CHECK-LABEL: func.func @train_step(
// CHECK-SAME: tensor<8x8xf32> {kiln.param = "model.embed_tokens.weight", kiln.sharding = #kiln.sharding<[{"tp"}, {}]>}
// CHECK-SAME: tensor<8x8xf32> {kiln.param = "lm_head.weight", kiln.sharding = #kiln.sharding<[{"tp"}, {}]>}
// The lookup in this rank's rows, zero elsewhere, summed over tp.
// CHECK: %[[EMB:.*]] = kiln.embedding {{.*}}vocab_axes = array<i16: 2>} : (tensor<8x8xf32>, tensor<2x4xi64>) -> tensor<2x4x8xf32>
// CHECK-NEXT: %[[H:.*]] = shard.all_reduce %[[EMB]] on @grid grid_axes = [2] : tensor<2x4x8xf32> -> tensor<2x4x8xf32>
// CHECK: %[[LOGITS:.*]] = kiln.linear {{.*}}fqn = "output"{{.*}} -> tensor<2x4x8xf32>
// Loss parallel: row maxima, then the sums of exp and the target logits,
// each all-reduced over tp; no collective moves the logits.
// CHECK-NEXT: %[[M:.*]] = kiln.vocab_parallel_max %[[LOGITS]] {{.*}} -> tensor<2x4xf32>
// CHECK-NEXT: %[[GM:.*]] = shard.all_reduce %[[M]] on @grid grid_axes = [2] reduction = max : tensor<2x4xf32>
// CHECK-NEXT: %[[S:.*]] = kiln.vocab_parallel_stats %[[LOGITS]], %[[GM]], %{{.*}} {fqn = "loss", vocab_axes = array<i16: 2>} {{.*}} -> tensor<2x4x2xf32>
// CHECK-NEXT: %[[GS:.*]] = shard.all_reduce %[[S]] on @grid grid_axes = [2] : tensor<2x4x2xf32>
// CHECK-NEXT: kiln.vocab_parallel_loss %[[GM]], %[[GS]] {fqn = "loss", total_positions = 8 : i64}
// The backward reuses the statistics.
// CHECK-NOT: kiln.vocab_parallel_max
// CHECK: %[[DL:.*]] = kiln.vocab_parallel_loss_backward %[[LOGITS]], %{{.*}}, %{{.*}}, %[[GM]], %[[GS]] {{.*}}vocab_axes = array<i16: 2>{{.*}} -> tensor<2x4x8xf32>
// CHECK-NEXT: %[[DX:.*]] = kiln.linear_backward_data %[[DL]]
// CHECK-NEXT: kiln.linear_backward_weight %[[DL]], {{.*}} -> tensor<8x8xf32>
// CHECK-NEXT: shard.all_reduce %[[DX]] on @grid grid_axes = [2]
// The table's gradient: this rank's 8 rows, no collective.
// CHECK: kiln.embedding_backward {{.*}}vocab_axes = array<i16: 2>, vocab_size = 8 : i64} {{.*}} -> tensor<8x8xf32>

// SP-LABEL: func.func @train_step(
// SP: %[[EMB:.*]] = kiln.embedding {{.*}}vocab_axes = array<i16: 2>} : (tensor<8x8xf32>, tensor<2x4xi64>) -> tensor<2x4x8xf32>
// SP-NEXT: shard.reduce_scatter %[[EMB]] on @grid grid_axes = [2] scatter_axis = 1 : tensor<2x4x8xf32> -> tensor<2x2x8xf32>
// SP: shard.all_gather %{{.*}} gather_axis = 1 : tensor<2x2x8xf32> -> tensor<2x4x8xf32>
// SP-NEXT: kiln.linear {{.*}}fqn = "output"{{.*}} -> tensor<2x4x8xf32>
// SP-NEXT: kiln.vocab_parallel_max
// SP: %[[G:.*]] = shard.all_gather %{{.*}} gather_axis = 1 : tensor<2x2x8xf32> -> tensor<2x4x8xf32>
// SP-NEXT: kiln.embedding_backward %[[G]], {{.*}}vocab_axes = array<i16: 2>, vocab_size = 8 : i64} {{.*}} -> tensor<8x8xf32>

// FSDP-LABEL: func.func @train_step(
// FSDP-SAME: tensor<4x8xf32> {kiln.param = "model.embed_tokens.weight", kiln.sharding = #kiln.sharding<[{"tp", "dp_shard"}, {}]>}
// FSDP: %[[T:.*]] = shard.all_gather %{{.*}} on @grid grid_axes = [1] gather_axis = 0 : tensor<4x8xf32> -> tensor<8x8xf32>
// FSDP-NEXT: kiln.embedding %[[T]], {{.*}}vocab_axes = array<i16: 2>} : (tensor<8x8xf32>, tensor<1x4xi64>) -> tensor<1x4x8xf32>
// FSDP: kiln.vocab_parallel_loss {{.*}}total_positions = 8 : i64
// FSDP: %[[DT:.*]] = kiln.embedding_backward {{.*}}vocab_size = 8 : i64} {{.*}} -> tensor<8x8xf32>
// FSDP-NEXT: shard.reduce_scatter %[[DT]] on @grid grid_axes = [1] scatter_axis = 0 : tensor<8x8xf32> -> tensor<4x8xf32>

// TIED-LABEL: func.func @train_step(
// TIED: kiln.embedding {{.*}}vocab_axes = array<i16: 2>} : (tensor<8x8xf32>
// TIED: kiln.vocab_parallel_loss
// TIED: %[[DW:.*]] = kiln.linear_backward_weight {{.*}} -> tensor<8x8xf32>
// TIED: %[[DT:.*]] = kiln.embedding_backward {{.*}}vocab_size = 8 : i64} {{.*}} -> tensor<8x8xf32>
// TIED-NEXT: kiln.add %[[DW]], %[[DT]] {{.*}} -> tensor<8x8xf32>

// COLWISE-LABEL: func.func @train_step(
// COLWISE-SAME: tensor<16x4xf32> {kiln.param = "model.embed_tokens.weight", kiln.sharding = #kiln.sharding<[{}, {"tp"}]>}
// COLWISE: %[[EMB:.*]] = kiln.embedding {{.*}}fqn = "tok_embeddings"{{.*}} : (tensor<16x4xf32>, tensor<2x4xi64>) -> tensor<2x4x4xf32>
// COLWISE-NEXT: shard.all_gather %[[EMB]] on @grid grid_axes = [2] gather_axis = 2 : tensor<2x4x4xf32> -> tensor<2x4x8xf32>

// EVAL-LABEL: func.func @loss(
// EVAL-SAME: tensor<1x4xi64> {kiln.input = "input_ids", kiln.sharding = #kiln.sharding<[{"dp_shard"}, {}]>}
// EVAL-SAME: tensor<4x8xf32> {kiln.param = "model.embed_tokens.weight", kiln.sharding = #kiln.sharding<[{"tp", "dp_shard"}, {}]>}
// EVAL-SAME: -> (tensor<f32> {kiln.sharding = #kiln.sharding<[]>})
// EVAL: kiln.embedding {{.*}}vocab_axes = array<i16: 2>}
// EVAL: kiln.vocab_parallel_loss {{.*}}total_positions = 8 : i64
// EVAL-NEXT: shard.all_reduce %{{.*}} on @grid grid_axes = [1] : tensor<f32>
// EVAL-NOT: kiln.adamw
