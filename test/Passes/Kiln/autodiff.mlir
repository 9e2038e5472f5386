// RUN: kiln-opt %s --kiln-autodiff --split-input-file --verify-diagnostics | FileCheck %s

// A tied toy model: the table feeds the embedding and the output projection,
// so its two gradients are summed; each forward op gets its VJP and the values
// the backward reads are marked as saved activations.
func.func @loss(%ids: tensor<2x4xi64> {kiln.input = "input_ids"},
                %labels: tensor<2x4xi64> {kiln.input = "labels"},
                %table: tensor<16x8xf32> {kiln.param = "model.embed_tokens.weight"},
                %norm: tensor<8xf32> {kiln.param = "model.norm.weight"},
                %w1: tensor<12x8xf32> {kiln.param = "model.layers.0.mlp.gate_proj.weight"},
                %w3: tensor<12x8xf32> {kiln.param = "model.layers.0.mlp.up_proj.weight"},
                %w2: tensor<8x12xf32> {kiln.param = "model.layers.0.mlp.down_proj.weight"})
    -> tensor<f32> {
  %h = kiln.embedding %table, %ids {fqn = "tok_embeddings"} : (tensor<16x8xf32>, tensor<2x4xi64>) -> tensor<2x4x8xf32>
  %g = kiln.linear %h, %w1 {fqn = "layers.0.feed_forward.w1"} : (tensor<2x4x8xf32>, tensor<12x8xf32>) -> tensor<2x4x12xf32>
  %u = kiln.linear %h, %w3 {fqn = "layers.0.feed_forward.w3"} : (tensor<2x4x8xf32>, tensor<12x8xf32>) -> tensor<2x4x12xf32>
  %a = kiln.swiglu %g, %u {fqn = "layers.0.feed_forward.swiglu"} : (tensor<2x4x12xf32>, tensor<2x4x12xf32>) -> tensor<2x4x12xf32>
  %d = kiln.linear %a, %w2 {fqn = "layers.0.feed_forward.w2"} : (tensor<2x4x12xf32>, tensor<8x12xf32>) -> tensor<2x4x8xf32>
  %r = kiln.add %h, %d {fqn = "layers.0.ffn_residual"} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %n = kiln.rms_norm %r, %norm {eps = 1.0e-6 : f32, fqn = "norm"} : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %logits = kiln.linear %n, %table {fqn = "output"} : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
  %loss = kiln.cross_entropy %logits, %labels {fqn = "loss"} : (tensor<2x4x16xf32>, tensor<2x4xi64>) -> tensor<f32>
  return %loss : tensor<f32>
}

// The original function is kept as it was.
// CHECK-LABEL: func.func @loss(
// CHECK-NOT: kiln.saved
// CHECK: return

// CHECK-LABEL: func.func @loss_grad(
// CHECK-SAME: -> (tensor<f32> {kiln.output = "loss"}, tensor<16x8xf32> {kiln.grad = "model.embed_tokens.weight"}, tensor<8xf32> {kiln.grad = "model.norm.weight"}, tensor<12x8xf32> {kiln.grad = "model.layers.0.mlp.gate_proj.weight"}, tensor<12x8xf32> {kiln.grad = "model.layers.0.mlp.up_proj.weight"}, tensor<8x12xf32> {kiln.grad = "model.layers.0.mlp.down_proj.weight"})
// CHECK: %[[H:.*]] = kiln.embedding {{.*}} {fqn = "tok_embeddings", kiln.saved = array<i64: 0>}
// CHECK: %[[G:.*]] = kiln.linear %[[H]], %{{.*}} {fqn = "layers.0.feed_forward.w1", kiln.saved = array<i64: 0>}
// CHECK: %[[U:.*]] = kiln.linear %[[H]], %{{.*}} {fqn = "layers.0.feed_forward.w3", kiln.saved = array<i64: 0>}
// CHECK: %[[A:.*]] = kiln.swiglu %[[G]], %[[U]] {fqn = "layers.0.feed_forward.swiglu", kiln.saved = array<i64: 0>}
// The down projection's output is not needed by any backward op.
// CHECK: kiln.linear %[[A]], %{{.*}} {fqn = "layers.0.feed_forward.w2"} :
// CHECK: %[[R:.*]] = kiln.add {{.*}} {fqn = "layers.0.ffn_residual", kiln.saved = array<i64: 0>}
// CHECK: %[[N:.*]] = kiln.rms_norm %[[R]], {{.*}} {eps = {{.*}}, fqn = "norm", kiln.saved = array<i64: 0>}
// CHECK: %[[LOGITS:.*]] = kiln.linear %[[N]], %arg2 {fqn = "output", kiln.saved = array<i64: 0>}
// CHECK: %[[LOSS:.*]] = kiln.cross_entropy %[[LOGITS]], %arg1 {fqn = "loss"}
// Backward, in reverse order, seeded with d loss = 1.
// CHECK: %[[SEED:.*]] = kiln.constant {fqn = "loss.seed_grad", value = dense<1.000000e+00> : tensor<f32>} : tensor<f32>
// CHECK: %[[DLOGITS:.*]] = kiln.cross_entropy_backward %[[LOGITS]], %arg1, %[[SEED]] {fqn = "loss"}
// CHECK: %[[DN:.*]] = kiln.linear_backward_data %[[DLOGITS]], %arg2 {fqn = "output"}
// CHECK: %[[DTABLE_OUT:.*]] = kiln.linear_backward_weight %[[DLOGITS]], %[[N]] {fqn = "output"}
// CHECK: %[[DR:.*]], %[[DNORM:.*]] = kiln.rms_norm_backward %[[DN]], %[[R]], %arg3 {{.*}}fqn = "norm"
// CHECK: %[[DA:.*]] = kiln.linear_backward_data %[[DR]], %arg6 {fqn = "layers.0.feed_forward.w2"}
// CHECK: %[[DW2:.*]] = kiln.linear_backward_weight %[[DR]], %[[A]] {fqn = "layers.0.feed_forward.w2"}
// CHECK: %[[DG:.*]], %[[DU:.*]] = kiln.swiglu_backward %[[DA]], %[[G]], %[[U]] {fqn = "layers.0.feed_forward.swiglu"}
// CHECK: %[[DH_U:.*]] = kiln.linear_backward_data %[[DU]], %arg5
// CHECK: %[[DW3:.*]] = kiln.linear_backward_weight %[[DU]], %[[H]]
// The residual stream's cotangents from the w1, w3 and skip branches are
// summed, named after the module that produced the stream.
// CHECK: %[[ACC1:.*]] = kiln.add %[[DR]], %[[DH_U]] {fqn = "tok_embeddings.grad_accum"}
// CHECK: %[[DH_G:.*]] = kiln.linear_backward_data %[[DG]], %arg4
// CHECK: %[[DW1:.*]] = kiln.linear_backward_weight %[[DG]], %[[H]]
// CHECK: %[[ACC2:.*]] = kiln.add %[[ACC1]], %[[DH_G]] {fqn = "tok_embeddings.grad_accum"}
// CHECK: %[[DTABLE_IN:.*]] = kiln.embedding_backward %[[ACC2]], %arg0 {fqn = "tok_embeddings", vocab_size = 16 : i64}
// Tied embeddings: one gradient, the sum of both uses, named after the
// module owning the table (its first user).
// CHECK: %[[DTABLE:.*]] = kiln.add %[[DTABLE_OUT]], %[[DTABLE_IN]] {fqn = "tok_embeddings.grad_accum"}
// CHECK: return %[[LOSS]], %[[DTABLE]], %[[DNORM]], %[[DW1]], %[[DW3]], %[[DW2]]

// -----

// expected-error@below {{kiln-autodiff: no function @loss to differentiate}}
module {
  func.func @forward(%x: tensor<4xf32>) -> tensor<4xf32> {
    return %x : tensor<4xf32>
  }
}

// -----

module {
  // expected-error@below {{kiln-autodiff: @loss must return the loss as an f32 scalar (tensor<f32>), then only f32 scalar metrics tagged 'kiln.output'}}
  func.func @loss(%x: tensor<4xf32> {kiln.param = "w"}) -> tensor<4xf32> {
    return %x : tensor<4xf32>
  }
}

// -----

// A second result must be a tagged metric, not another loss.
module {
  // expected-error@below {{kiln-autodiff: @loss must return the loss as an f32 scalar}}
  func.func @loss(%ids: tensor<1x2xi64> {kiln.input = "input_ids"},
                  %labels: tensor<1x2xi64> {kiln.input = "labels"},
                  %table: tensor<8x4xf32> {kiln.param = "table"}) -> (tensor<f32>, tensor<f32>) {
    %h = kiln.embedding %table, %ids {fqn = "tok_embeddings"} : (tensor<8x4xf32>, tensor<1x2xi64>) -> tensor<1x2x4xf32>
    %logits = kiln.linear %h, %table {fqn = "output"} : (tensor<1x2x4xf32>, tensor<8x4xf32>) -> tensor<1x2x8xf32>
    %loss = kiln.cross_entropy %logits, %labels {fqn = "loss"} : (tensor<1x2x8xf32>, tensor<1x2xi64>) -> tensor<f32>
    return %loss, %loss : tensor<f32>, tensor<f32>
  }
}

// -----

// A MoE loss with the router's aux loss: the metric result is returned by
// @loss_grad, after the loss and before the gradients, with its tag; the
// aux loss's gradient flows into the router through its probabilities
// while the metric itself is not differentiated again.
// CHECK-LABEL: func.func @loss_grad
// CHECK-SAME: -> (tensor<f32> {kiln.output = "loss"}, tensor<f32> {kiln.output = "aux_loss"}, tensor<4x8xf32> {kiln.grad = "gate"}
// CHECK: %[[W:.*]], %[[IDS:.*]], %[[P:.*]] = kiln.router
// CHECK: %[[AUX:.*]] = kiln.load_balancing_loss %[[P]], %[[IDS]]
// CHECK: %[[DP:.*]] = kiln.load_balancing_loss_backward %{{.*}}, %[[IDS]] {fqn = "aux_loss", num_experts = 4 : i64}
// CHECK: kiln.router_backward %[[P]], %[[IDS]], %{{.*}}, %[[DP]] {fqn = "layers.0.moe.router", norm_topk_prob}
// CHECK: return %{{.*}}, %[[AUX]], %{{.*}}
module {
  func.func @loss(%x: tensor<1x2x8xf32> {kiln.input = "input_ids"},
                  %labels: tensor<1x2xi64> {kiln.input = "labels"},
                  %gate: tensor<4x8xf32> {kiln.param = "gate"},
                  %w1: tensor<4x6x8xf32> {kiln.param = "w1"},
                  %w3: tensor<4x6x8xf32> {kiln.param = "w3"},
                  %w2: tensor<4x8x6xf32> {kiln.param = "w2"})
      -> (tensor<f32>, tensor<f32> {kiln.output = "aux_loss"}) {
    %logits = kiln.linear %x, %gate {fqn = "layers.0.moe.router.gate"} : (tensor<1x2x8xf32>, tensor<4x8xf32>) -> tensor<1x2x4xf32>
    %w, %ids, %p = kiln.router %logits {fqn = "layers.0.moe.router", norm_topk_prob, top_k = 2 : i64}
        : (tensor<1x2x4xf32>) -> (tensor<1x2x2xf32>, tensor<1x2x2xi64>, tensor<1x2x4xf32>)
    %y = kiln.grouped_experts %x, %w, %ids, %w1, %w3, %w2 {fqn = "layers.0.moe.experts"}
        : (tensor<1x2x8xf32>, tensor<1x2x2xf32>, tensor<1x2x2xi64>, tensor<4x6x8xf32>, tensor<4x6x8xf32>, tensor<4x8x6xf32>) -> tensor<1x2x8xf32>
    %sq = kiln.cross_entropy %y, %labels {fqn = "loss"} : (tensor<1x2x8xf32>, tensor<1x2xi64>) -> tensor<f32>
    %aux = kiln.load_balancing_loss %p, %ids {fqn = "aux_loss"} : (tensor<1x2x4xf32>, tensor<1x2x2xi64>) -> tensor<f32>
    %scaled = kiln.scale %aux {factor = 1.0e-2 : f64, fqn = "aux_loss.scaled"} : (tensor<f32>) -> tensor<f32>
    %total = kiln.add %sq, %scaled {fqn = "loss.with_aux"} : (tensor<f32>, tensor<f32>) -> tensor<f32>
    return %total, %aux : tensor<f32>, tensor<f32>
  }
}

// -----

module {
  // expected-error@below {{kiln-autodiff: parameter 'unused' does not influence the loss}}
  func.func @loss(%ids: tensor<1x2xi64> {kiln.input = "input_ids"},
                  %labels: tensor<1x2xi64> {kiln.input = "labels"},
                  %table: tensor<8x4xf32> {kiln.param = "table"},
                  %unused: tensor<4xf32> {kiln.param = "unused"}) -> tensor<f32> {
    %h = kiln.embedding %table, %ids {fqn = "tok_embeddings"} : (tensor<8x4xf32>, tensor<1x2xi64>) -> tensor<1x2x4xf32>
    %logits = kiln.linear %h, %table {fqn = "output"} : (tensor<1x2x4xf32>, tensor<8x4xf32>) -> tensor<1x2x8xf32>
    %loss = kiln.cross_entropy %logits, %labels {fqn = "loss"} : (tensor<1x2x8xf32>, tensor<1x2xi64>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}

// -----

// A constant in the loss is a leaf: it has no gradient and stops nothing.
// CHECK-LABEL: func.func @loss_grad(
// CHECK: %[[C:.*]] = kiln.constant {fqn = "bias"
// CHECK: kiln.add %{{.*}}, %[[C]] {fqn = "biased"
// CHECK: return %{{.*}}, %{{.*}} : tensor<f32>, tensor<8x4xf32>
module {
  func.func @loss(%ids: tensor<1x2xi64> {kiln.input = "input_ids"},
                  %labels: tensor<1x2xi64> {kiln.input = "labels"},
                  %table: tensor<8x4xf32> {kiln.param = "table"}) -> tensor<f32> {
    %h = kiln.embedding %table, %ids {fqn = "tok_embeddings"} : (tensor<8x4xf32>, tensor<1x2xi64>) -> tensor<1x2x4xf32>
    %c = kiln.constant {fqn = "bias", value = dense<0.5> : tensor<1x2x4xf32>} : tensor<1x2x4xf32>
    %b = kiln.add %h, %c {fqn = "biased"} : (tensor<1x2x4xf32>, tensor<1x2x4xf32>) -> tensor<1x2x4xf32>
    %logits = kiln.linear %b, %table {fqn = "output"} : (tensor<1x2x4xf32>, tensor<8x4xf32>) -> tensor<1x2x8xf32>
    %loss = kiln.cross_entropy %logits, %labels {fqn = "loss"} : (tensor<1x2x8xf32>, tensor<1x2xi64>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}

// -----

// Differentiating through attention's log-sum-exp is reported, not ignored.
module {
  func.func @loss(%q: tensor<1x2x1x4xf32> {kiln.param = "q"},
                  %labels: tensor<1x1xi64> {kiln.input = "labels"}) -> tensor<f32> {
    // expected-error@+1 {{'kiln.attention' op (fqn 'attn'): the log-sum-exp result 'lse' has a cotangent}}
    %o, %lse = kiln.attention %q, %q, %q {causal, scale = 0.5 : f32, fqn = "attn"} : (tensor<1x2x1x4xf32>, tensor<1x2x1x4xf32>, tensor<1x2x1x4xf32>) -> (tensor<1x2x1x4xf32>, tensor<1x1x2xf32>)
    %n = kiln.cross_entropy %lse, %labels {fqn = "loss"} : (tensor<1x1x2xf32>, tensor<1x1xi64>) -> tensor<f32>
    return %n : tensor<f32>
  }
}
