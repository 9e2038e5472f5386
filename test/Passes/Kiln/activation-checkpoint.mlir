// RUN: kiln-opt %s --kiln-autodiff --kiln-activation-checkpoint=mode=full | FileCheck %s --check-prefix=FULL
// RUN: kiln-opt %s --kiln-autodiff --kiln-activation-checkpoint="mode=selective selective-option=op" | FileCheck %s --check-prefix=OP
// RUN: kiln-opt %s --kiln-autodiff --kiln-activation-checkpoint="mode=selective selective-option=2" | FileCheck %s --check-prefix=EVERY2
// RUN: kiln-opt %s --kiln-autodiff --kiln-activation-checkpoint=mode=none | FileCheck %s --check-prefix=NONE
// RUN: kiln-opt %s --kiln-autodiff --kiln-activation-checkpoint=mode=full --kiln-activation-checkpoint=mode=full | FileCheck %s --check-prefix=FULL
// RUN: kiln-opt %s --kiln-autodiff --kiln-activation-checkpoint=mode=full --kiln-optimizer | FileCheck %s --check-prefix=STEP
// RUN: not kiln-opt %s --kiln-autodiff --kiln-activation-checkpoint=mode=partial 2>&1 | FileCheck %s --check-prefix=BADMODE
// RUN: not kiln-opt %s --kiln-autodiff --kiln-activation-checkpoint="mode=selective selective-option=0" 2>&1 | FileCheck %s --check-prefix=BADOPTION
// RUN: not kiln-opt %s --kiln-autodiff --kiln-activation-checkpoint="mode=selective selective-option=ops" 2>&1 | FileCheck %s --check-prefix=BADOPTION
// RUN: not kiln-opt %s --kiln-activation-checkpoint=mode=full 2>&1 | FileCheck %s --check-prefix=NOGRAD
// RUN: not kiln-opt %s --kiln-training --kiln-activation-checkpoint="mode=full func=train_step" 2>&1 | FileCheck %s --check-prefix=OPTIMIZED
// RUN: not kiln-opt %s --kiln-autodiff --kiln-shard="func=loss_grad dp-shard=2" --kiln-partition=func=loss_grad --kiln-activation-checkpoint=mode=full 2>&1 | FileCheck %s --check-prefix=SHARDED
// With pipeline-stages, each differentiated stage (kiln-autodiff
// pipeline-stages) is checkpointed before kiln-stage-forward-backward cuts it:
// stage 0 (the embedding and layer 0) then keeps only the layer's input for
// its backward, which recomputes the layer, instead of five activations.
// RUN: kiln-opt %s --kiln-pipeline-split=stage-starts=layers.1 --kiln-autodiff=pipeline-stages=1 --kiln-activation-checkpoint="mode=full pipeline-stages=1" --kiln-stage-forward-backward | FileCheck %s --check-prefix=STAGES
// RUN: kiln-opt %s --kiln-pipeline-split=stage-starts=layers.1 --kiln-autodiff=pipeline-stages=1 --kiln-stage-forward-backward | FileCheck %s --check-prefix=STAGESKEEP
// RUN: not kiln-opt %s --kiln-activation-checkpoint="mode=full pipeline-stages=1" 2>&1 | FileCheck %s --check-prefix=NOSTAGES
// RUN: not kiln-opt %s --kiln-stage-forward-backward 2>&1 | FileCheck %s --check-prefix=NOSTAGEGRAD

// Two toy layers (an MLP each) between the embedding and the tied output.
// kiln-autodiff saves every value a VJP reads; checkpointing a layer trades
// those reads for copies of the layer's ops, tagged kiln.recomputed, placed
// before the layer's backward. The layer's input (the residual stream from
// the layer before) and its output (read by the next module) stay saved.
func.func @loss(%ids: tensor<2x4xi64> {kiln.input = "input_ids"},
                %labels: tensor<2x4xi64> {kiln.input = "labels"},
                %table: tensor<16x8xf32> {kiln.param = "model.embed_tokens.weight"},
                %n0: tensor<8xf32> {kiln.param = "model.layers.0.post_attention_layernorm.weight"},
                %a0: tensor<12x8xf32> {kiln.param = "model.layers.0.mlp.gate_proj.weight"},
                %b0: tensor<12x8xf32> {kiln.param = "model.layers.0.mlp.up_proj.weight"},
                %c0: tensor<8x12xf32> {kiln.param = "model.layers.0.mlp.down_proj.weight"},
                %n1: tensor<8xf32> {kiln.param = "model.layers.1.post_attention_layernorm.weight"},
                %a1: tensor<12x8xf32> {kiln.param = "model.layers.1.mlp.gate_proj.weight"},
                %b1: tensor<12x8xf32> {kiln.param = "model.layers.1.mlp.up_proj.weight"},
                %c1: tensor<8x12xf32> {kiln.param = "model.layers.1.mlp.down_proj.weight"},
                %norm: tensor<8xf32> {kiln.param = "model.norm.weight"})
    -> tensor<f32> {
  %h = kiln.embedding %table, %ids {fqn = "tok_embeddings"} : (tensor<16x8xf32>, tensor<2x4xi64>) -> tensor<2x4x8xf32>
  %x0 = kiln.rms_norm %h, %n0 {eps = 1.0e-6 : f32, fqn = "layers.0.ffn_norm"} : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %g0 = kiln.linear %x0, %a0 {fqn = "layers.0.feed_forward.w1"} : (tensor<2x4x8xf32>, tensor<12x8xf32>) -> tensor<2x4x12xf32>
  %u0 = kiln.linear %x0, %b0 {fqn = "layers.0.feed_forward.w3"} : (tensor<2x4x8xf32>, tensor<12x8xf32>) -> tensor<2x4x12xf32>
  %s0 = kiln.swiglu %g0, %u0 {fqn = "layers.0.feed_forward.swiglu"} : (tensor<2x4x12xf32>, tensor<2x4x12xf32>) -> tensor<2x4x12xf32>
  %d0 = kiln.linear %s0, %c0 {fqn = "layers.0.feed_forward.w2"} : (tensor<2x4x12xf32>, tensor<8x12xf32>) -> tensor<2x4x8xf32>
  %r0 = kiln.add %h, %d0 {fqn = "layers.0.ffn_residual"} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %x1 = kiln.rms_norm %r0, %n1 {eps = 1.0e-6 : f32, fqn = "layers.1.ffn_norm"} : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %g1 = kiln.linear %x1, %a1 {fqn = "layers.1.feed_forward.w1"} : (tensor<2x4x8xf32>, tensor<12x8xf32>) -> tensor<2x4x12xf32>
  %u1 = kiln.linear %x1, %b1 {fqn = "layers.1.feed_forward.w3"} : (tensor<2x4x8xf32>, tensor<12x8xf32>) -> tensor<2x4x12xf32>
  %s1 = kiln.swiglu %g1, %u1 {fqn = "layers.1.feed_forward.swiglu"} : (tensor<2x4x12xf32>, tensor<2x4x12xf32>) -> tensor<2x4x12xf32>
  %d1 = kiln.linear %s1, %c1 {fqn = "layers.1.feed_forward.w2"} : (tensor<2x4x12xf32>, tensor<8x12xf32>) -> tensor<2x4x8xf32>
  %r1 = kiln.add %r0, %d1 {fqn = "layers.1.ffn_residual"} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %n = kiln.rms_norm %r1, %norm {eps = 1.0e-6 : f32, fqn = "norm"} : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %logits = kiln.linear %n, %table {fqn = "output"} : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
  %loss = kiln.cross_entropy %logits, %labels {fqn = "loss"} : (tensor<2x4x16xf32>, tensor<2x4xi64>) -> tensor<f32>
  return %loss : tensor<f32>
}

// Full: both layers are recomputed from their inputs, layer 1 first, each
// right before the backward op that first reads it; the forward keeps only
// the embedding, the residual stream between the layers and what the
// untouched modules save.
// FULL-LABEL: func.func @loss_grad(
// FULL:       %[[H:.*]] = kiln.embedding {{.*}}kiln.saved = array<i64: 0>
// FULL-NEXT:  kiln.rms_norm %[[H]], %{{.*}} {eps = {{.*}}, fqn = "layers.0.ffn_norm"} :
// FULL-NEXT:  kiln.linear {{.*}} {fqn = "layers.0.feed_forward.w1"} :
// FULL-NEXT:  kiln.linear {{.*}} {fqn = "layers.0.feed_forward.w3"} :
// FULL-NEXT:  kiln.swiglu {{.*}} {fqn = "layers.0.feed_forward.swiglu"} :
// FULL-NEXT:  kiln.linear {{.*}} {fqn = "layers.0.feed_forward.w2"} :
// FULL-NEXT:  %[[R0:.*]] = kiln.add {{.*}} {fqn = "layers.0.ffn_residual", kiln.saved = array<i64: 0>}
// FULL-NEXT:  kiln.rms_norm %[[R0]], %{{.*}} {eps = {{.*}}, fqn = "layers.1.ffn_norm"} :
// FULL:       kiln.add {{.*}} {fqn = "layers.1.ffn_residual", kiln.saved = array<i64: 0>}
// FULL:       %[[DS1:.*]] = kiln.linear_backward_data %{{.*}}, %arg10 {fqn = "layers.1.feed_forward.w2"}
// FULL-NEXT:  %[[X1:.*]] = kiln.rms_norm %[[R0]], %arg7 {eps = {{.*}}, fqn = "layers.1.ffn_norm", kiln.recomputed}
// FULL-NEXT:  %[[G1:.*]] = kiln.linear %[[X1]], %arg8 {fqn = "layers.1.feed_forward.w1", kiln.recomputed}
// FULL-NEXT:  %[[U1:.*]] = kiln.linear %[[X1]], %arg9 {fqn = "layers.1.feed_forward.w3", kiln.recomputed}
// FULL-NEXT:  %[[S1:.*]] = kiln.swiglu %[[G1]], %[[U1]] {fqn = "layers.1.feed_forward.swiglu", kiln.recomputed}
// FULL-NEXT:  kiln.linear_backward_weight %{{.*}}, %[[S1]] {fqn = "layers.1.feed_forward.w2"}
// FULL-NEXT:  kiln.swiglu_backward %[[DS1]], %[[G1]], %[[U1]]
// FULL:       kiln.linear_backward_weight %{{.*}}, %[[X1]] {fqn = "layers.1.feed_forward.w1"}
// FULL:       kiln.rms_norm_backward %{{.*}}, %[[R0]], %arg7
// FULL:       kiln.rms_norm %[[H]], %arg3 {eps = {{.*}}, fqn = "layers.0.ffn_norm", kiln.recomputed}
// FULL-NEXT:  kiln.linear {{.*}} {fqn = "layers.0.feed_forward.w1", kiln.recomputed}
// FULL-NEXT:  kiln.linear {{.*}} {fqn = "layers.0.feed_forward.w3", kiln.recomputed}
// FULL-NEXT:  kiln.swiglu {{.*}} {fqn = "layers.0.feed_forward.swiglu", kiln.recomputed}
// FULL-NOT:   kiln.recomputed
// FULL:       return

// Selective op: the matmuls' results stay saved; the norm and SwiGLU are
// recomputed from them.
// OP-LABEL: func.func @loss_grad(
// OP:       kiln.rms_norm {{.*}} {eps = {{.*}}, fqn = "layers.0.ffn_norm"} :
// OP-NEXT:  %[[G0:.*]] = kiln.linear {{.*}} {fqn = "layers.0.feed_forward.w1", kiln.saved = array<i64: 0>}
// OP-NEXT:  %[[U0:.*]] = kiln.linear {{.*}} {fqn = "layers.0.feed_forward.w3", kiln.saved = array<i64: 0>}
// OP-NEXT:  kiln.swiglu {{.*}} {fqn = "layers.0.feed_forward.swiglu"} :
// OP:       kiln.rms_norm {{.*}} {eps = {{.*}}, fqn = "layers.1.ffn_norm", kiln.recomputed}
// OP-NEXT:  kiln.swiglu {{.*}} {fqn = "layers.1.feed_forward.swiglu", kiln.recomputed}
// OP-NOT:   kiln.linear {{.*}}kiln.recomputed
// OP:       kiln.rms_norm {{.*}} {eps = {{.*}}, fqn = "layers.0.ffn_norm", kiln.recomputed}
// OP-NEXT:  kiln.swiglu %[[G0]], %[[U0]] {fqn = "layers.0.feed_forward.swiglu", kiln.recomputed}
// OP-NOT:   kiln.recomputed
// OP:       return

// Every 2nd layer (torchtitan counts blocks from 1): layer 1 only.
// EVERY2-LABEL: func.func @loss_grad(
// EVERY2:       kiln.rms_norm {{.*}} {eps = {{.*}}, fqn = "layers.0.ffn_norm", kiln.saved = array<i64: 0>}
// EVERY2:       kiln.swiglu {{.*}} {fqn = "layers.0.feed_forward.swiglu", kiln.saved = array<i64: 0>}
// EVERY2:       kiln.rms_norm {{.*}} {eps = {{.*}}, fqn = "layers.1.ffn_norm"} :
// EVERY2:       kiln.swiglu {{.*}} {fqn = "layers.1.feed_forward.swiglu"} :
// EVERY2:       kiln.rms_norm {{.*}}fqn = "layers.1.ffn_norm", kiln.recomputed}
// EVERY2:       kiln.swiglu {{.*}}fqn = "layers.1.feed_forward.swiglu", kiln.recomputed}
// EVERY2-NOT:   kiln.recomputed
// EVERY2:       return

// NONE-NOT: kiln.recomputed

// kiln-optimizer inlines the rewritten @loss_grad into @train_step.
// STEP-LABEL: func.func @train_step(
// STEP-COUNT-8: kiln.recomputed

// BADMODE: for the --mode option: 'partial' is not one of none, selective, full
// BADOPTION: error: kiln-activation-checkpoint: selective-option must be 'op' or a positive integer (checkpoint every N-th layer), got
// NOGRAD: error: kiln-activation-checkpoint: no function @loss_grad (run kiln-autodiff first)
// OPTIMIZED: error: kiln-activation-checkpoint runs on the function kiln-autodiff made, before kiln-optimizer; @train_step holds optimizer state
// SHARDED: error: 'shard.all_gather' op kiln-activation-checkpoint runs on the single-rank @loss_grad before kiln-shard and kiln-partition; it does not recompute 'shard.all_gather'

// STAGES-LABEL: func.func @loss_stage0_forward(
// STAGES-SAME: -> (tensor<2x4x8xf32> {kiln.transfer = 0 : i64}, tensor<2x4x8xf32> {kiln.residual = 0 : i64}) attributes {kiln.stage = 0 : i64}
// STAGES: func.func @loss_stage0_backward(%[[H:[a-z0-9]+]]: tensor<2x4x8xf32> {kiln.residual = 0 : i64}
// STAGES: kiln.rms_norm %[[H]], %{{.*}} {{{.*}}fqn = "layers.0.ffn_norm", kiln.recomputed}
// STAGES: kiln.swiglu {{.*}}kiln.recomputed
// STAGES-LABEL: func.func @loss_stage1_forward(
// STAGES-SAME: -> (tensor<f32> {kiln.output = "loss"}, {{.*}}{kiln.residual = 2 : i64})
// STAGES-NOT: kiln.residual = 3
// STAGES-LABEL: func.func @loss_stage1_backward(
// STAGES: kiln.recomputed
// STAGESKEEP-LABEL: func.func @loss_stage0_forward(
// STAGESKEEP-SAME: {kiln.residual = 4 : i64})
// STAGESKEEP-NOT: kiln.recomputed
// NOSTAGES: error: kiln-activation-checkpoint: pipeline-stages, but no function is a differentiated stage (run kiln-autodiff pipeline-stages first)
// NOSTAGEGRAD: error: kiln-stage-forward-backward: no differentiated stage (a 'kiln.stage' function named ..._grad: run kiln-autodiff pipeline-stages first)
