// kiln-lower-to-hlo on the mixture-of-experts ops (LowerToHloMoe.cpp); the
// numbers against the CPU kernels are test/unit/MoeHloTest.cpp's.
// RUN: kiln-opt %s -split-input-file --kiln-lower-to-hlo 2>&1 | FileCheck %s

// The router: softmax times the reciprocal of the sum; top-2 as two passes
// of "max, then the lowest id holding it" (a min-reduce of the s32 column
// ids, 4 where not the max), the first pick masked to -inf before the
// second and the selection made on probs + expert_bias; the picks
// concatenated, the weights renormalised, the ids widened to s64.
// CHECK-LABEL: func.func @train_step(
// CHECK: %[[E:.*]] = hlo.exp
// CHECK: %[[SUM:.*]] = hlo.reduce %[[E]], {{.*}} {combiner = #hlo<combiner add>, dimensions = array<i64: 2>}
// CHECK: %[[INV:.*]] = hlo.divide {{.*}}, %[[SUM]] : (tensor<2x3xf32>, tensor<2x3xf32>)
// CHECK: %[[INVB:.*]] = hlo.broadcast_in_dim %[[INV]]
// CHECK: %[[PROBS:.*]] = hlo.multiply %[[E]], %[[INVB]]
// CHECK: %[[BIAS:.*]] = hlo.broadcast_in_dim %arg1 {broadcast_dimensions = array<i64: 2>} : (tensor<4xf32>) -> tensor<2x3x4xf32>
// CHECK: %[[SCORE:.*]] = hlo.add %[[PROBS]], %[[BIAS]]
// CHECK: %[[COLS:.*]] = hlo.iota {iota_dimension = 2 : i64} : tensor<2x3x4xi32>
// CHECK: hlo.reduce %[[SCORE]], {{.*}} {combiner = #hlo<combiner max>
// CHECK: %[[TOP:.*]] = hlo.compare %[[SCORE]], {{.*}} {comparison_direction = #hlo<comparison_direction EQ>}
// CHECK: hlo.select %[[TOP]], %[[COLS]], {{.*}} : (tensor<2x3x4xi1>, tensor<2x3x4xi32>, tensor<2x3x4xi32>)
// CHECK: hlo.constant {value = dense<2147483647> : tensor<i32>}
// CHECK: %[[ID0:.*]] = hlo.reduce {{.*}} {combiner = #hlo<combiner min>, dimensions = array<i64: 2>} : (tensor<2x3x4xi32>, tensor<i32>) -> tensor<2x3xi32>
// CHECK: %[[SEL0:.*]] = hlo.compare %[[COLS]], {{.*}} {comparison_direction = #hlo<comparison_direction EQ>}
// CHECK: hlo.select %[[SEL0]], %[[PROBS]], {{.*}}
// CHECK: %[[MASKED:.*]] = hlo.select %[[SEL0]], {{.*}}, %[[SCORE]]
// CHECK: hlo.reduce %[[MASKED]], {{.*}} {combiner = #hlo<combiner max>
// CHECK: hlo.reduce {{.*}} {combiner = #hlo<combiner min>, dimensions = array<i64: 2>} : (tensor<2x3x4xi32>, tensor<i32>) -> tensor<2x3xi32>
// CHECK: %[[W:.*]] = hlo.concatenate {{.*}} {dimension = 2 : i64} : (tensor<2x3x1xf32>, tensor<2x3x1xf32>) -> tensor<2x3x2xf32>
// CHECK: %[[IDS:.*]] = hlo.concatenate {{.*}} {dimension = 2 : i64} : (tensor<2x3x1xi32>, tensor<2x3x1xi32>) -> tensor<2x3x2xi32>
// CHECK: %[[WSUM:.*]] = hlo.reduce %[[W]], {{.*}} {combiner = #hlo<combiner add>, dimensions = array<i64: 2>}
// CHECK: %[[WSUMB:.*]] = hlo.broadcast_in_dim %[[WSUM]]
// CHECK: %[[WN:.*]] = hlo.divide %[[W]], %[[WSUMB]]
// CHECK: %[[IDS64:.*]] = hlo.convert %[[IDS]] : (tensor<2x3x2xi32>) -> tensor<2x3x2xi64>
// CHECK-NOT: hlo.select
// CHECK: return %[[WN]], %[[IDS64]], %[[PROBS]]
module {
  func.func @train_step(%logits: tensor<2x3x4xf32>, %bias: tensor<4xf32>)
      -> (tensor<2x3x2xf32>, tensor<2x3x2xi64>, tensor<2x3x4xf32>) {
    %w, %ids, %p = kiln.router %logits, %bias {norm_topk_prob, top_k = 2 : i64, fqn = "layers.0.moe.router"}
        : (tensor<2x3x4xf32>, tensor<4xf32>) -> (tensor<2x3x2xf32>, tensor<2x3x2xi64>, tensor<2x3x4xf32>)
    return %w, %ids, %p : tensor<2x3x2xf32>, tensor<2x3x2xi64>, tensor<2x3x4xf32>
  }
}

// -----

// The experts, dense: the gate and up projections of every token by every
// expert [tokens, E, I] -> [E, tokens, I], SwiGLU, the down projection
// batched over E, and the combination over E by each token's routing
// weights [tokens, E] (a one-hot of its ids times its weights, summed over
// the k slots). The backward recomputes the forward; its weight gradients
// contract the tokens, d x contracts both E and I.
// CHECK-LABEL: func.func @train_step(
// CHECK: hlo.dot_general %[[X:.*]], %arg3 {lhs_batching_dimensions = array<i64>, lhs_contracting_dimensions = array<i64: 1>, rhs_batching_dimensions = array<i64>, rhs_contracting_dimensions = array<i64: 2>} : (tensor<6x8xf32>, tensor<4x5x8xf32>) -> tensor<6x4x5xf32>
// CHECK: hlo.transpose {{.*}} {permutation = array<i64: 1, 0, 2>} : (tensor<6x4x5xf32>) -> tensor<4x6x5xf32>
// CHECK: %[[Y:.*]] = hlo.dot_general {{.*}}, %arg5 {lhs_batching_dimensions = array<i64: 0>, lhs_contracting_dimensions = array<i64: 2>, rhs_batching_dimensions = array<i64: 0>, rhs_contracting_dimensions = array<i64: 2>} : (tensor<4x6x5xf32>, tensor<4x8x5xf32>) -> tensor<4x6x8xf32>
// CHECK: %[[HOT:.*]] = hlo.compare {{.*}} {comparison_direction = #hlo<comparison_direction EQ>} : (tensor<6x2x4xi32>, tensor<6x2x4xi32>) -> tensor<6x2x4xi1>
// CHECK: hlo.convert %[[HOT]] : (tensor<6x2x4xi1>) -> tensor<6x2x4xf32>
// CHECK: %[[C:.*]] = hlo.reduce {{.*}} {combiner = #hlo<combiner add>, dimensions = array<i64: 1>} : (tensor<6x2x4xf32>, tensor<f32>) -> tensor<6x4xf32>
// CHECK: hlo.dot_general %[[Y]], %[[C]] {lhs_batching_dimensions = array<i64: 1>, lhs_contracting_dimensions = array<i64: 0>, rhs_batching_dimensions = array<i64: 0>, rhs_contracting_dimensions = array<i64: 1>} : (tensor<4x6x8xf32>, tensor<6x4xf32>) -> tensor<6x8xf32>
// Backward: d w2 [E, H, I], d w1 [E, I, H], d x over E and I.
// CHECK-DAG: hlo.dot_general {{.*}} {lhs_batching_dimensions = array<i64: 0>, lhs_contracting_dimensions = array<i64: 1>, rhs_batching_dimensions = array<i64: 0>, rhs_contracting_dimensions = array<i64: 1>} : (tensor<4x6x8xf32>, tensor<4x6x5xf32>) -> tensor<4x8x5xf32>
// CHECK-DAG: hlo.dot_general {{.*}} {lhs_batching_dimensions = array<i64>, lhs_contracting_dimensions = array<i64: 1>, rhs_batching_dimensions = array<i64>, rhs_contracting_dimensions = array<i64: 0>} : (tensor<4x6x5xf32>, tensor<6x8xf32>) -> tensor<4x5x8xf32>
// CHECK-DAG: hlo.dot_general {{.*}} {lhs_batching_dimensions = array<i64>, lhs_contracting_dimensions = array<i64: 0, 2>, rhs_batching_dimensions = array<i64>, rhs_contracting_dimensions = array<i64: 0, 1>} : (tensor<4x6x5xf32>, tensor<4x5x8xf32>) -> tensor<6x8xf32>
// CHECK-NOT: kiln.
// CHECK: return
module {
  func.func @train_step(%x: tensor<2x3x8xf32>, %w: tensor<2x3x2xf32>, %ids: tensor<2x3x2xi64>,
                        %w1: tensor<4x5x8xf32>, %w3: tensor<4x5x8xf32>, %w2: tensor<4x8x5xf32>,
                        %dy: tensor<2x3x8xf32>)
      -> (tensor<2x3x8xf32>, tensor<2x3x8xf32>, tensor<2x3x2xf32>, tensor<4x5x8xf32>,
          tensor<4x5x8xf32>, tensor<4x8x5xf32>) {
    %y = kiln.grouped_experts %x, %w, %ids, %w1, %w3, %w2 {fqn = "layers.0.moe.experts"}
        : (tensor<2x3x8xf32>, tensor<2x3x2xf32>, tensor<2x3x2xi64>, tensor<4x5x8xf32>,
           tensor<4x5x8xf32>, tensor<4x8x5xf32>) -> tensor<2x3x8xf32>
    %dx, %dw, %dw1, %dw3, %dw2 = kiln.grouped_experts_backward %dy, %x, %w, %ids, %w1, %w3, %w2
        {fqn = "layers.0.moe.experts"}
        : (tensor<2x3x8xf32>, tensor<2x3x8xf32>, tensor<2x3x2xf32>, tensor<2x3x2xi64>,
           tensor<4x5x8xf32>, tensor<4x5x8xf32>, tensor<4x8x5xf32>)
        -> (tensor<2x3x8xf32>, tensor<2x3x2xf32>, tensor<4x5x8xf32>, tensor<4x5x8xf32>,
            tensor<4x8x5xf32>)
    return %y, %dx, %dw, %dw1, %dw3, %dw2 : tensor<2x3x8xf32>, tensor<2x3x8xf32>, tensor<2x3x2xf32>,
        tensor<4x5x8xf32>, tensor<4x5x8xf32>, tensor<4x8x5xf32>
  }
}

// -----

// The load-balancing loss over two layers (N = 12 rows): the expert counts
// (one-hots summed over rows and slots) and the summed probabilities of both
// layers, experts / N^2 = 4 / 144 times their dot; its gradient broadcasts
// the same counts-based row to every row. kiln.scale is a multiply.
// CHECK-LABEL: func.func @train_step(
// CHECK: hlo.reduce {{.*}} {combiner = #hlo<combiner add>, dimensions = array<i64: 0, 1>} : (tensor<2x3x4xf32>, tensor<f32>) -> tensor<4xf32>
// CHECK: hlo.reduce {{.*}} {combiner = #hlo<combiner add>, dimensions = array<i64: 0, 1, 2>} : (tensor<2x3x2x4xf32>, tensor<f32>) -> tensor<4xf32>
// CHECK: hlo.constant {value = dense<0.027777{{[0-9]*}}> : tensor<f32>}
// CHECK: hlo.constant {value = dense<0.0099999{{[0-9]*}}> : tensor<f32>}
// CHECK: hlo.broadcast_in_dim {{.*}} {broadcast_dimensions = array<i64: 2>} : (tensor<4xf32>) -> tensor<2x3x4xf32>
// CHECK-NOT: kiln.
// CHECK: return
module {
  func.func @train_step(%p0: tensor<2x3x4xf32>, %p1: tensor<2x3x4xf32>, %i0: tensor<2x3x2xi64>,
                        %i1: tensor<2x3x2xi64>, %g: tensor<f32>)
      -> (tensor<f32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>) {
    %aux = kiln.load_balancing_loss %p0, %p1, %i0, %i1 {fqn = "aux_loss"}
        : (tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<2x3x2xi64>, tensor<2x3x2xi64>) -> tensor<f32>
    %s = kiln.scale %aux {factor = 0.01 : f64, fqn = "aux_loss.scaled"} : (tensor<f32>) -> tensor<f32>
    %d0, %d1 = kiln.load_balancing_loss_backward %g, %i0, %i1 {num_experts = 4 : i64, fqn = "aux_loss"}
        : (tensor<f32>, tensor<2x3x2xi64>, tensor<2x3x2xi64>) -> (tensor<2x3x4xf32>, tensor<2x3x4xf32>)
    return %s, %d0, %d1 : tensor<f32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>
  }
}

// -----

// The all-to-all dispatcher (LowerToHloExpertDispatch.cpp): 2 chunks of 3
// tokens, top-2 of 4 experts in 2 blocks, capacity 3. Each pair's block is
// its id / 2; the block one-hots go slot-major ([chunks, k, tokens]) and
// their exclusive prefix sum along the 6 pairs of a chunk is one matmul
// with the strictly lower triangle (one block of pairs: no second level, no
// padding); places below the capacity are kept, the others get slot -1.
// One scatter-add into 12 buffer rows + row 0 (where dropped pairs land),
// in float32 (neuronx-cc refuses integer scatter-reduce) and converted to
// s32, records each row's token and pair; the rows, their weights and their ids
// (+1, so unfilled rows read -1) are gathered from tables whose row 0 is
// zero. Combine and its gradient recover block and place from the slots
// (divide by the capacity) and gather.
// CHECK-LABEL: func.func @train_step(
// CHECK: %[[IDS:.*]] = hlo.convert %arg2 : (tensor<2x3x2xi64>) -> tensor<2x3x2xi32>
// CHECK: %[[BLOCK:.*]] = hlo.divide %[[IDS]], {{.*}} : (tensor<2x3x2xi32>, tensor<2x3x2xi32>) -> tensor<2x3x2xi32>
// CHECK: %[[ONEHOT:.*]] = hlo.convert {{.*}} : (tensor<2x3x2x2xi1>) -> tensor<2x3x2x2xf32>
// CHECK: %[[SLOTMAJOR:.*]] = hlo.transpose %[[ONEHOT]] {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x3x2x2xf32>) -> tensor<2x2x3x2xf32>
// CHECK: %[[ORDERED:.*]] = hlo.reshape %[[SLOTMAJOR]] : (tensor<2x2x3x2xf32>) -> tensor<2x6x2xf32>
// CHECK-NOT: hlo.pad
// CHECK: %[[ROW:.*]] = hlo.iota {iota_dimension = 0 : i64} : tensor<6x6xi32>
// CHECK: %[[COL:.*]] = hlo.iota {iota_dimension = 1 : i64} : tensor<6x6xi32>
// CHECK: %[[LOWER:.*]] = hlo.compare %[[COL]], %[[ROW]] {comparison_direction = #hlo<comparison_direction LT>}
// CHECK: %[[TRI:.*]] = hlo.convert %[[LOWER]] : (tensor<6x6xi1>) -> tensor<6x6xf32>
// CHECK: hlo.dot_general %[[TRI]], {{.*}} {lhs_batching_dimensions = array<i64>, lhs_contracting_dimensions = array<i64: 1>, rhs_batching_dimensions = array<i64>, rhs_contracting_dimensions = array<i64: 2>} : (tensor<6x6xf32>, tensor<2x1x6x2xf32>) -> tensor<6x2x1x2xf32>
// CHECK-NOT: hlo.slice
// CHECK: %[[MINE:.*]] = hlo.multiply {{.*}}, %[[ORDERED]] : (tensor<2x6x2xf32>, tensor<2x6x2xf32>)
// CHECK: %[[BEFORE:.*]] = hlo.reduce %[[MINE]], {{.*}} dimensions = array<i64: 2>
// CHECK: %[[PLACE:.*]] = hlo.transpose {{.*}} {permutation = array<i64: 0, 2, 1>} : (tensor<2x2x3xf32>) -> tensor<2x3x2xf32>
// CHECK: hlo.constant {value = dense<3.000000e+00> : tensor<f32>}
// CHECK: %[[KEPT:.*]] = hlo.compare %[[PLACE]], {{.*}} {comparison_direction = #hlo<comparison_direction LT>}
// CHECK: %[[SLOT:.*]] = hlo.select %[[KEPT]], {{.*}} : (tensor<2x3x2xi1>, tensor<2x3x2xi32>, tensor<2x3x2xi32>) -> tensor<2x3x2xi32>
// CHECK: %[[SOURCES:.*]] = hlo.scatter {{.*}} {combiner = #hlo<combiner add>, {{.*}}} : (tensor<13x2xf32>, tensor<2x3x2xi32>, tensor<2x3x2x2xf32>) -> tensor<13x2xf32>
// CHECK: %[[CUT:.*]] = hlo.slice %[[SOURCES]] {limit_indices = array<i64: 13, 2>, start_indices = array<i64: 1, 0>
// CHECK: hlo.convert %[[CUT]] : (tensor<12x2xf32>) -> tensor<12x2xi32>
// CHECK: %[[XTABLE:.*]] = hlo.pad {{.*}} {edge_padding_high = array<i64: 0, 0>, edge_padding_low = array<i64: 1, 0>, interior_padding = array<i64: 0, 0>} : (tensor<6x4xf32>, tensor<f32>) -> tensor<7x4xf32>
// CHECK: %[[ROWS:.*]] = hlo.gather %[[XTABLE]], {{.*}} : (tensor<7x4xf32>, tensor<12xi32>) -> tensor<12x4xf32>
// CHECK: hlo.gather {{.*}} : (tensor<13x1xf32>, tensor<12xi32>) -> tensor<12x1xf32>
// CHECK: hlo.gather {{.*}} : (tensor<13x1xi32>, tensor<12xi32>) -> tensor<12x1xi32>
// CHECK: hlo.constant {value = dense<-1> : tensor<i32>}
// CHECK: %[[SLOTS:.*]] = hlo.convert %[[SLOT]] : (tensor<2x3x2xi32>) -> tensor<2x3x2xi64>
// Combine: block = slot / 3, the token's rows gathered and summed over k.
// CHECK: hlo.divide {{.*}} : (tensor<2x3x2xi32>, tensor<2x3x2xi32>) -> tensor<2x3x2xi32>
// CHECK: %[[PICKED:.*]] = hlo.gather {{.*}} : (tensor<13x4xf32>, tensor<2x3x2xi32>) -> tensor<2x3x2x4xf32>
// CHECK: %[[Y:.*]] = hlo.reduce %[[PICKED]], {{.*}} dimensions = array<i64: 2>} : (tensor<2x3x2x4xf32>, tensor<f32>) -> tensor<2x3x4xf32>
// Combine's gradient: each kept row's token by one scatter, its gradient gathered.
// CHECK: hlo.scatter {{.*}} : (tensor<13x1xf32>, tensor<2x3x2xi32>, tensor<2x3x2x1xf32>) -> tensor<13x1xf32>
// CHECK: %[[DROWS:.*]] = hlo.gather {{.*}} : (tensor<7x4xf32>, tensor<12xi32>) -> tensor<12x4xf32>
// CHECK: return {{.*}}, %[[SLOTS]], %[[Y]],
func.func @train_step(%x: tensor<2x3x4xf32>, %w: tensor<2x3x2xf32>, %ids: tensor<2x3x2xi64>,
                      %dy: tensor<2x3x4xf32>)
    -> (tensor<2x6x4xf32>, tensor<2x6x1xf32>, tensor<2x6x1xi64>, tensor<2x3x2xi64>, tensor<2x3x4xf32>, tensor<2x6x4xf32>) {
  %rows, %rw, %re, %slots = kiln.expert_dispatch %x, %w, %ids
      {groups = 2 : i64, chunks = 2 : i64, capacity = 3 : i64, num_experts = 4 : i64, fqn = "layers.0.moe.experts"}
      : (tensor<2x3x4xf32>, tensor<2x3x2xf32>, tensor<2x3x2xi64>)
      -> (tensor<2x6x4xf32>, tensor<2x6x1xf32>, tensor<2x6x1xi64>, tensor<2x3x2xi64>)
  %y = kiln.expert_combine %slots, %rows {chunks = 2 : i64, fqn = "layers.0.moe.experts"}
      : (tensor<2x3x2xi64>, tensor<2x6x4xf32>) -> tensor<2x3x4xf32>
  %dr = kiln.expert_combine_backward %dy, %slots
      {groups = 2 : i64, chunks = 2 : i64, capacity = 3 : i64, fqn = "layers.0.moe.experts"}
      : (tensor<2x3x4xf32>, tensor<2x3x2xi64>) -> tensor<2x6x4xf32>
  return %rows, %rw, %re, %slots, %y, %dr
      : tensor<2x6x4xf32>, tensor<2x6x1xf32>, tensor<2x6x1xi64>, tensor<2x3x2xi64>, tensor<2x3x4xf32>, tensor<2x6x4xf32>
}
