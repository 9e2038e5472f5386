// Uneven FSDP2 shards: on 3 ranks a 16-row table and an 8-entry norm are
// padded to 18 and 9, each rank storing 6 and 3; gathers drop the padding,
// gradients are padded before their reduce-scatter, and AdamW runs on the
// padded shards (zeros stay zero).
// RUN: kiln-opt %s --kiln-training --kiln-shard="dp-shard=3" --kiln-partition | FileCheck %s

func.func @loss(%ids: tensor<3x2xi64> {kiln.input = "input_ids"},
                %labels: tensor<3x2xi64> {kiln.input = "labels"},
                %table: tensor<16x8xf32> {kiln.param = "model.embed_tokens.weight"},
                %norm: tensor<8xf32> {kiln.param = "model.norm.weight"}) -> tensor<f32> {
  %h = kiln.embedding %table, %ids {fqn = "tok_embeddings"} : (tensor<16x8xf32>, tensor<3x2xi64>) -> tensor<3x2x8xf32>
  %n = kiln.rms_norm %h, %norm {eps = 1.0e-6 : f32, fqn = "norm"} : (tensor<3x2x8xf32>, tensor<8xf32>) -> tensor<3x2x8xf32>
  %logits = kiln.linear %n, %table {fqn = "output"} : (tensor<3x2x8xf32>, tensor<16x8xf32>) -> tensor<3x2x16xf32>
  %loss = kiln.cross_entropy %logits, %labels {fqn = "loss"} : (tensor<3x2x16xf32>, tensor<3x2xi64>) -> tensor<f32>
  return %loss : tensor<f32>
}

// CHECK-LABEL: func.func @train_step(
// CHECK-SAME: %[[TABLE:.*]]: tensor<6x8xf32> {kiln.param = "model.embed_tokens.weight", kiln.sharding = #kiln.sharding<[{"dp_shard"}, {}], padded_to = [18, 0]>}
// CHECK-SAME: %[[NORM:.*]]: tensor<3xf32> {kiln.param = "model.norm.weight", kiln.sharding = #kiln.sharding<[{"dp_shard"}], padded_to = [9]>}
// CHECK: %[[G:.*]] = shard.all_gather %[[TABLE]] on @grid grid_axes = [1] gather_axis = 0 : tensor<6x8xf32> -> tensor<18x8xf32>
// CHECK-NEXT: %[[T:.*]] = kiln.narrow %[[G]] {dim = 0 : i64, fqn = "fsdp.padding", size = 16 : i64} : (tensor<18x8xf32>) -> tensor<16x8xf32>
// CHECK-NEXT: kiln.embedding %[[T]]
// CHECK: %[[DW:.*]] = kiln.pad %{{.*}} {dim = 0 : i64, fqn = "fsdp.padding", size = 9 : i64} : (tensor<8xf32>) -> tensor<9xf32>
// CHECK-NEXT: %[[DWS:.*]] = shard.reduce_scatter %[[DW]] on @grid grid_axes = [1] scatter_axis = 0 : tensor<9xf32> -> tensor<3xf32>
// CHECK: %[[DT:.*]] = kiln.pad %{{.*}} size = 18 : i64} : (tensor<16x8xf32>) -> tensor<18x8xf32>
// CHECK-NEXT: %[[DTS:.*]] = shard.reduce_scatter %[[DT]] {{.*}} : tensor<18x8xf32> -> tensor<6x8xf32>
// CHECK: kiln.adamw %[[TABLE]], %[[DTS]], {{.*}} -> (tensor<6x8xf32>, tensor<6x8xf32>, tensor<6x8xf32>)
// CHECK: kiln.adamw %[[NORM]], %[[DWS]], {{.*}} -> (tensor<3xf32>, tensor<3xf32>, tensor<3xf32>)

// FSDP2 over 3 ranks of each tp shard (TP2, the table vocabulary-parallel):
// each 8-row tp shard is padded to 9 as FSDP2 pads a TP parameter's local
// shard, 3 rows per rank (18 = 2 x 9 rows in all); gathers over dp_shard give
// the 9-row block, cut to the 8 rows of the tp shard.
// RUN: kiln-opt %s --kiln-training --kiln-shard="dp-shard=3 tp=2 sequence-parallel=false tp-plan=tok_embeddings=rowwise" --kiln-partition | FileCheck %s --check-prefix=TP
// TP-LABEL: func.func @train_step(
// TP-SAME: %[[TABLE:.*]]: tensor<3x8xf32> {kiln.param = "model.embed_tokens.weight", kiln.sharding = #kiln.sharding<[{"tp", "dp_shard"}, {}], padded_to = [18, 0]>}
// TP: %[[G:.*]] = shard.all_gather %[[TABLE]] on @grid grid_axes = [1] gather_axis = 0 : tensor<3x8xf32> -> tensor<9x8xf32>
// TP-NEXT: %[[T:.*]] = kiln.narrow %[[G]] {dim = 0 : i64, fqn = "fsdp.padding", size = 8 : i64} : (tensor<9x8xf32>) -> tensor<8x8xf32>
// TP-NEXT: kiln.embedding %[[T]], {{.*}}vocab_axes = array<i16: 2>
// TP: %[[DT:.*]] = kiln.pad %{{.*}} size = 9 : i64} : (tensor<8x8xf32>) -> tensor<9x8xf32>
// TP-NEXT: %[[DTS:.*]] = shard.reduce_scatter %[[DT]] on @grid grid_axes = [1] scatter_axis = 0 : tensor<9x8xf32> -> tensor<3x8xf32>
// TP: kiln.adamw %[[TABLE]], %[[DTS]], {{.*}} -> (tensor<3x8xf32>, tensor<3x8xf32>, tensor<3x8xf32>)
