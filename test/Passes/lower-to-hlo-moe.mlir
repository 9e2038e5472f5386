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
