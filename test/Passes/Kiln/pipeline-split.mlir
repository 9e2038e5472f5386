// kiln-pipeline-split: @loss cut into one function per pipeline stage at the
// modules `stage-starts` names, the values that cross stages numbered as
// kiln.transfer arguments and results.
// RUN: kiln-opt %s --kiln-pipeline-split=stage-starts=layers.1 | FileCheck %s --check-prefix=TWO
// RUN: kiln-opt %s --kiln-pipeline-split="stage-starts=layers.1,norm" | FileCheck %s --check-prefix=THREE
// kiln-autodiff's pipeline-stages differentiates each stage from the
// cotangents of what it sends, into a forward and a backward function (run
// in turn they give @loss_grad's gradients on both fixtures:
// PipelineStageGradTest).
// RUN: kiln-opt %s --kiln-pipeline-split="stage-starts=layers.1,norm" --kiln-autodiff=pipeline-stages=1 --kiln-stage-forward-backward | FileCheck %s --check-prefix=GRAD
// RUN: not kiln-opt %s --kiln-autodiff=pipeline-stages=1 2>&1 | FileCheck %s --check-prefix=NOSTAGES
// RUN: not kiln-opt %S/Inputs/autodiff-stages-invalid.mlir --split-input-file --kiln-autodiff=pipeline-stages=1 2>&1 | FileCheck %s --check-prefix=BADSTAGE
// kiln-optimizer's pipeline-degree builds one pipeline rank's update over
// its stages' parameters (stage s on rank s mod P), the gradient norm's
// squares all-reduced over the pp axis of the grid it makes.
// RUN: kiln-opt %s --kiln-pipeline-split="stage-starts=layers.1,norm" --kiln-autodiff=pipeline-stages=1 --kiln-stage-forward-backward --kiln-optimizer="pipeline-degree=2 pipeline-rank=0 microbatches=2" | FileCheck %s --check-prefix=RANK0
// RUN: kiln-opt %s --kiln-pipeline-split="stage-starts=layers.1,norm" --kiln-autodiff=pipeline-stages=1 --kiln-stage-forward-backward --kiln-optimizer="pipeline-degree=2 pipeline-rank=1 microbatches=2" | FileCheck %s --check-prefix=RANK1
// RUN: kiln-opt %s --kiln-pipeline-split="stage-starts=layers.1,norm" --kiln-autodiff=pipeline-stages=1 --kiln-stage-forward-backward --kiln-optimizer="pipeline-degree=3 pipeline-rank=2" | FileCheck %s --check-prefix=LAST
// RUN: not kiln-opt %s --kiln-optimizer=pipeline-degree=2 2>&1 | FileCheck %s --check-prefix=NOBACKWARD
// RUN: not kiln-opt %s --kiln-pipeline-split="stage-starts=layers.1,norm" --kiln-autodiff=pipeline-stages=1 --kiln-stage-forward-backward --kiln-optimizer="pipeline-degree=4 pipeline-rank=3" 2>&1 | FileCheck %s --check-prefix=IDLE
// RUN: not kiln-opt %s --kiln-optimizer="pipeline-degree=2 pipeline-rank=2" 2>&1 | FileCheck %s --check-prefix=RANKRANGE
// RUN: not kiln-opt %s --kiln-optimizer="pipeline-degree=2 load-balance-coeff=0.001" 2>&1 | FileCheck %s --check-prefix=BALANCE
// With data-parallel-axes, replicas of the pipeline sum each gradient over
// their axis before the norm and the update.
// RUN: kiln-opt %S/Inputs/pipeline-update-replicas.mlir --kiln-optimizer="pipeline-degree=2 pipeline-rank=1 data-parallel-axes=1 microbatches=4" | FileCheck %s --check-prefix=REPLICAS
// RUN: not kiln-opt %S/Inputs/pipeline-update-replicas.mlir --kiln-optimizer="pipeline-degree=2 data-parallel-axes=2" 2>&1 | FileCheck %s --check-prefix=NOAXIS
// RUN: not kiln-opt %s --kiln-pipeline-split=stage-starts=layers.1 --kiln-autodiff=pipeline-stages=1 --kiln-stage-forward-backward --kiln-optimizer="pipeline-degree=2 data-parallel-axes=1" 2>&1 | FileCheck %s --check-prefix=NOREPLICAAXIS
// Starts that name no module of @loss, or name them out of order, are errors.
// RUN: not kiln-opt %s --kiln-pipeline-split=stage-starts=layers.7 2>&1 | FileCheck %s --check-prefix=MISSING
// RUN: not kiln-opt %s --kiln-pipeline-split=func=nothere 2>&1 | FileCheck %s --check-prefix=NOFUNC
// RUN: not kiln-opt %s --kiln-pipeline-split="stage-starts=norm,layers.1" 2>&1 | FileCheck %s --check-prefix=ORDER
// An op of an earlier module placed after a later one's cannot be staged.
// RUN: not kiln-opt %S/Inputs/pipeline-split-invalid.mlir --kiln-pipeline-split=stage-starts=layers.1 2>&1 | FileCheck %s --check-prefix=BACK

// A tied toy model in bf16: the table's cast feeds the embedding and the
// output; the norm also reads the embedding (a skip over two layers, as a
// MoE's load-balancing loss reads every layer's routing).
func.func @loss(%ids: tensor<1x2xi64> {kiln.input = "input_ids"},
                %labels: tensor<1x2xi64> {kiln.input = "labels"},
                %table: tensor<8x4xf32> {kiln.param = "model.embed_tokens.weight"},
                %w0: tensor<4x4xf32> {kiln.param = "model.layers.0.mlp.down_proj.weight"},
                %w1: tensor<4x4xf32> {kiln.param = "model.layers.1.mlp.down_proj.weight"},
                %norm: tensor<4xf32> {kiln.param = "model.norm.weight"}) -> tensor<f32> {
  %t = kiln.cast %table {fqn = "tok_embeddings", to = bf16} : (tensor<8x4xf32>) -> tensor<8x4xf32>
  %h = kiln.embedding %t, %ids {fqn = "tok_embeddings"} : (tensor<8x4xf32>, tensor<1x2xi64>) -> tensor<1x2x4xf32>
  %d0 = kiln.linear %h, %w0 {fqn = "layers.0.feed_forward.w2"} : (tensor<1x2x4xf32>, tensor<4x4xf32>) -> tensor<1x2x4xf32>
  %r0 = kiln.add %h, %d0 {fqn = "layers.0.ffn_residual"} : (tensor<1x2x4xf32>, tensor<1x2x4xf32>) -> tensor<1x2x4xf32>
  %d1 = kiln.linear %r0, %w1 {fqn = "layers.1.feed_forward.w2"} : (tensor<1x2x4xf32>, tensor<4x4xf32>) -> tensor<1x2x4xf32>
  %r1 = kiln.add %r0, %d1 {fqn = "layers.1.ffn_residual"} : (tensor<1x2x4xf32>, tensor<1x2x4xf32>) -> tensor<1x2x4xf32>
  %s = kiln.add %r1, %h {fqn = "norm.skip"} : (tensor<1x2x4xf32>, tensor<1x2x4xf32>) -> tensor<1x2x4xf32>
  %n = kiln.rms_norm %s, %norm {eps = 1.0e-6 : f32, fqn = "norm"} : (tensor<1x2x4xf32>, tensor<4xf32>) -> tensor<1x2x4xf32>
  %logits = kiln.linear %n, %t {fqn = "output"} : (tensor<1x2x4xf32>, tensor<8x4xf32>) -> tensor<1x2x8xf32>
  %loss = kiln.cross_entropy %logits, %labels {fqn = "loss"} : (tensor<1x2x8xf32>, tensor<1x2xi64>) -> tensor<f32>
  return %loss : tensor<f32>
}

// @loss stays; two stages follow it.
// TWO-LABEL: func.func @loss(
// TWO: return
// Stage 0 sends the embedding (0, the skip's) and the first residual (1).
// TWO-LABEL: func.func @loss_stage0(
// TWO-SAME: %[[IDS:.*]]: tensor<1x2xi64> {kiln.input = "input_ids"}, %[[TABLE:.*]]: tensor<8x4xf32> {kiln.param = "model.embed_tokens.weight"}, %[[W0:.*]]: tensor<4x4xf32> {kiln.param = "model.layers.0.mlp.down_proj.weight"})
// TWO-SAME: -> (tensor<1x2x4xf32> {kiln.transfer = 0 : i64}, tensor<1x2x4xf32> {kiln.transfer = 1 : i64})
// TWO-SAME: attributes {kiln.stage = 0 : i64}
// TWO-NEXT: %[[T:.*]] = kiln.cast %[[TABLE]] {fqn = "tok_embeddings", to = bf16}
// TWO-NEXT: %[[H:.*]] = kiln.embedding %[[T]], %[[IDS]]
// TWO-NEXT: %[[D0:.*]] = kiln.linear %[[H]], %[[W0]]
// TWO-NEXT: %[[R0:.*]] = kiln.add %[[H]], %[[D0]]
// TWO-NEXT: return %[[H]], %[[R0]]
// The last stage receives them first, then takes the labels and its
// parameters: the tied table too, cast again for the output.
// TWO-LABEL: func.func @loss_stage1(
// TWO-SAME: %[[H1:.*]]: tensor<1x2x4xf32> {kiln.transfer = 0 : i64}, %[[R01:.*]]: tensor<1x2x4xf32> {kiln.transfer = 1 : i64}, %[[LABELS:.*]]: tensor<1x2xi64> {kiln.input = "labels"}, %[[TABLE1:.*]]: tensor<8x4xf32> {kiln.param = "model.embed_tokens.weight"}, %[[W1:.*]]: tensor<4x4xf32> {kiln.param = "model.layers.1.mlp.down_proj.weight"}, %[[NORM:.*]]: tensor<4xf32> {kiln.param = "model.norm.weight"})
// TWO-SAME: -> tensor<f32> attributes {kiln.stage = 1 : i64}
// TWO-NEXT: %[[T1:.*]] = kiln.cast %[[TABLE1]] {fqn = "tok_embeddings", to = bf16}
// TWO-NEXT: %[[D1:.*]] = kiln.linear %[[R01]], %[[W1]]
// TWO-NEXT: %[[R1:.*]] = kiln.add %[[R01]], %[[D1]]
// TWO-NEXT: %[[S:.*]] = kiln.add %[[R1]], %[[H1]] {fqn = "norm.skip"}
// TWO-NEXT: %[[N:.*]] = kiln.rms_norm %[[S]], %[[NORM]]
// TWO-NEXT: %[[LOGITS:.*]] = kiln.linear %[[N]], %[[T1]] {fqn = "output"}
// TWO-NEXT: %[[LOSS:.*]] = kiln.cross_entropy %[[LOGITS]], %[[LABELS]]
// TWO-NEXT: return %[[LOSS]]

// Three stages: the embedding passes through the middle stage to the norm.
// THREE-LABEL: func.func @loss_stage0(
// THREE-SAME: -> (tensor<1x2x4xf32> {kiln.transfer = 0 : i64}, tensor<1x2x4xf32> {kiln.transfer = 1 : i64})
// THREE-LABEL: func.func @loss_stage1(
// THREE-SAME: %[[H:.*]]: tensor<1x2x4xf32> {kiln.transfer = 0 : i64}, %[[R0:.*]]: tensor<1x2x4xf32> {kiln.transfer = 1 : i64}, %[[W1:.*]]: tensor<4x4xf32> {kiln.param = "model.layers.1.mlp.down_proj.weight"})
// THREE-SAME: -> (tensor<1x2x4xf32> {kiln.transfer = 0 : i64}, tensor<1x2x4xf32> {kiln.transfer = 2 : i64})
// THREE-SAME: attributes {kiln.stage = 1 : i64}
// THREE-NEXT: %[[D1:.*]] = kiln.linear %[[R0]], %[[W1]]
// THREE-NEXT: %[[R1:.*]] = kiln.add %[[R0]], %[[D1]]
// THREE-NEXT: return %[[H]], %[[R1]]
// THREE-LABEL: func.func @loss_stage2(
// THREE-SAME: %{{.*}}: tensor<1x2x4xf32> {kiln.transfer = 0 : i64}, %{{.*}}: tensor<1x2x4xf32> {kiln.transfer = 2 : i64}, %{{.*}}: tensor<1x2xi64> {kiln.input = "labels"}
// THREE-SAME: attributes {kiln.stage = 2 : i64}
// THREE-NOT: kiln.embedding
// THREE: kiln.cross_entropy
// THREE-NOT: func.func

// Each stage becomes a forward, which keeps what its backward reads as
// residuals, and a backward. Stage 0 receives nothing, so its backward
// returns no cotangent; it takes those of the two transfers it sends.
// GRAD-LABEL: func.func @loss_stage0_forward(
// GRAD-SAME: -> (tensor<1x2x4xf32> {kiln.transfer = 0 : i64}, tensor<1x2x4xf32> {kiln.transfer = 1 : i64}, tensor<1x2x4xf32> {kiln.residual = 0 : i64})
// GRAD-SAME: attributes {kiln.stage = 0 : i64}
// GRAD: %[[H:.*]] = kiln.embedding {{.*}}kiln.saved = array<i64: 0>
// GRAD: return %[[H]], %{{.*}}, %[[H]] :
// GRAD-LABEL: func.func @loss_stage0_backward(
// GRAD-SAME: %{{.*}}: tensor<1x2x4xf32> {kiln.residual = 0 : i64}, %{{.*}}: tensor<1x2xi64> {kiln.input = "input_ids"}, %{{.*}}: tensor<4x4xf32> {kiln.param = "model.layers.0.mlp.down_proj.weight"}, %{{.*}}: tensor<1x2x4xf32> {kiln.cotangent = 0 : i64}, %{{.*}}: tensor<1x2x4xf32> {kiln.cotangent = 1 : i64})
// GRAD-SAME: -> (tensor<8x4xf32> {kiln.grad = "model.embed_tokens.weight"}, tensor<4x4xf32> {kiln.grad = "model.layers.0.mlp.down_proj.weight"})
// GRAD-NOT: kiln.linear %
// GRAD-NOT: kiln.saved
// GRAD: kiln.embedding_backward
// The middle stage passes the embedding's cotangent (0) straight back and
// gives the first residual's (1) from the second's (2); it reads the
// activation it received, so it keeps no residual of its own.
// GRAD-LABEL: func.func @loss_stage1_forward(
// GRAD-SAME: -> (tensor<1x2x4xf32> {kiln.transfer = 0 : i64}, tensor<1x2x4xf32> {kiln.transfer = 2 : i64})
// GRAD-LABEL: func.func @loss_stage1_backward(
// GRAD-SAME: %{{.*}}: tensor<1x2x4xf32> {kiln.transfer = 1 : i64}, %{{.*}}: tensor<4x4xf32> {kiln.param = "model.layers.1.mlp.down_proj.weight"}, %[[C0:[a-z0-9]+]]: tensor<1x2x4xf32> {kiln.cotangent = 0 : i64}, %[[C2:[a-z0-9]+]]: tensor<1x2x4xf32> {kiln.cotangent = 2 : i64})
// GRAD-SAME: -> (tensor<4x4xf32> {kiln.grad = "model.layers.1.mlp.down_proj.weight"}, tensor<1x2x4xf32> {kiln.cotangent = 0 : i64}, tensor<1x2x4xf32> {kiln.cotangent = 1 : i64})
// GRAD: kiln.linear_backward_data %[[C2]]
// GRAD: %[[SUM:.*]] = kiln.add %[[C2]], %{{.*}} {fqn = "layers.1.feed_forward.w2.grad_accum"}
// GRAD-NEXT: return %{{.*}}, %[[C0]], %[[SUM]] :
// The last stage returns the loss from its forward; its backward starts
// from a seed of 1 and casts the tied table again rather than keeping the
// cast per microbatch.
// GRAD-LABEL: func.func @loss_stage2_forward(
// GRAD-SAME: -> (tensor<f32> {kiln.output = "loss"}, tensor<1x2x8xf32> {kiln.residual = 0 : i64}, tensor<1x2x4xf32> {kiln.residual = 1 : i64}, tensor<1x2x4xf32> {kiln.residual = 2 : i64})
// GRAD-NEXT: kiln.cast {{.*}} {fqn = "tok_embeddings", to = bf16}
// GRAD-LABEL: func.func @loss_stage2_backward(
// GRAD-SAME: -> (tensor<8x4xf32> {kiln.grad = "model.embed_tokens.weight"}, tensor<4xf32> {kiln.grad = "model.norm.weight"}, tensor<1x2x4xf32> {kiln.cotangent = 0 : i64}, tensor<1x2x4xf32> {kiln.cotangent = 2 : i64})
// GRAD-NEXT: %[[T:.*]] = kiln.cast %{{.*}} {fqn = "tok_embeddings", to = bf16}
// GRAD-NEXT: kiln.constant {{.*}}fqn = "loss.seed_grad"
// GRAD: kiln.linear_backward_data %{{.*}}, %[[T]] {fqn = "output"}

// Pipeline rank 0 of 2 runs stages 0 and 2: the tied table (in both) is
// one parameter, updated once and counted once in the norm, whose squares
// are summed over the pp axis; the gradients are sums over 2 microbatches,
// so the norm and the clipping coefficient carry the 1/2.
// RANK0: module attributes {kiln.grid_axes = ["pp"]}
// RANK0-NEXT: shard.grid @grid(shape = 2)
// RANK0-LABEL: func.func @train_step(
// RANK0-SAME: {kiln.param = "model.embed_tokens.weight"}, %{{.*}}: tensor<4x4xf32> {kiln.param = "model.layers.0.mlp.down_proj.weight"}, %{{.*}}: tensor<4xf32> {kiln.param = "model.norm.weight"}, %[[STEP:[a-z0-9]+]]: tensor<i64> {kiln.state = "step"}
// RANK0-SAME: %[[GT:[a-z0-9]+]]: tensor<8x4xf32> {kiln.grad = "model.embed_tokens.weight"}, %[[GW0:[a-z0-9]+]]: tensor<4x4xf32> {kiln.grad = "model.layers.0.mlp.down_proj.weight"}, %[[GN:[a-z0-9]+]]: tensor<4xf32> {kiln.grad = "model.norm.weight"})
// RANK0-SAME: tensor<f32> {kiln.output = "grad_norm"})
// RANK0-NEXT: %[[SQ:.*]] = kiln.global_norm %[[GT]], %[[GW0]], %[[GN]] {fqn = "optimizer.grad_norm", squared}
// RANK0-NEXT: %[[ALL:.*]] = shard.all_reduce %[[SQ]] on @grid grid_axes = [0]
// RANK0-NEXT: %[[ROOT:.*]] = kiln.sqrt %[[ALL]]
// RANK0-NEXT: %[[NORM:.*]] = kiln.scale %[[ROOT]] {factor = 5.000000e-01 : f64
// RANK0-NEXT: %[[COEF:.*]] = kiln.clip_coef %[[NORM]]
// RANK0-NEXT: %[[MEAN:.*]] = kiln.scale %[[COEF]] {factor = 5.000000e-01 : f64
// RANK0-NEXT: %[[RATE:.*]] = kiln.lr_schedule %[[STEP]]
// RANK0-NEXT: kiln.adamw %{{.*}}, %[[GT]], {{.*}}, %[[STEP]], %[[RATE]], %[[MEAN]] {{{.*}}fqn = "tok_embeddings"
// RANK0-NEXT: kiln.adamw %{{.*}}, %[[GW0]], {{.*}} {{{.*}}fqn = "layers.0.feed_forward.w2"
// RANK0-NEXT: kiln.adamw %{{.*}}, %[[GN]], {{.*}} {{{.*}}fqn = "norm"
// RANK0-NEXT: kiln.next_step %[[STEP]]
// RANK0-NEXT: return {{.*}}, %[[NORM]] :
// Rank 1 runs stage 1 alone.
// RANK1-LABEL: func.func @train_step(%{{.*}}: tensor<4x4xf32> {kiln.param = "model.layers.1.mlp.down_proj.weight"}, %{{.*}}: tensor<i64> {kiln.state = "step"}
// RANK1-SAME: %[[G:[a-z0-9]+]]: tensor<4x4xf32> {kiln.grad = "model.layers.1.mlp.down_proj.weight"})
// RANK1-NEXT: kiln.global_norm %[[G]] {fqn = "optimizer.grad_norm", squared}
// RANK1-NEXT: shard.all_reduce
// With three ranks the last (stage 2) updates the table too, from its
// gradient summed with the first stage's, but rank 0 counts it in the norm.
// LAST: shard.grid @grid(shape = 3)
// LAST-LABEL: func.func @train_step(%{{.*}}: tensor<8x4xf32> {kiln.param = "model.embed_tokens.weight"}, %{{.*}}: tensor<4xf32> {kiln.param = "model.norm.weight"},
// LAST-SAME: %{{.*}}: tensor<8x4xf32> {kiln.grad = "model.embed_tokens.weight"}, %[[GN:[a-z0-9]+]]: tensor<4xf32> {kiln.grad = "model.norm.weight"})
// LAST-NEXT: kiln.global_norm %[[GN]] {fqn = "optimizer.grad_norm", squared} : (tensor<4xf32>) -> tensor<f32>
// LAST-NEXT: shard.all_reduce
// LAST-NEXT: kiln.sqrt
// LAST-NEXT: kiln.clip_coef
// LAST: kiln.adamw
// LAST: kiln.adamw

// REPLICAS-LABEL: func.func @train_step(%{{.*}}: tensor<4xf32> {kiln.param = "model.norm.weight"}
// REPLICAS-SAME: %[[G:[a-z0-9]+]]: tensor<4xf32> {kiln.grad = "model.norm.weight"})
// REPLICAS-NEXT: %[[SUM:.*]] = shard.all_reduce %[[G]] on @grid grid_axes = [1]
// REPLICAS-NEXT: %[[SQ:.*]] = kiln.global_norm %[[SUM]] {fqn = "optimizer.grad_norm", squared}
// REPLICAS-NEXT: shard.all_reduce %[[SQ]] on @grid grid_axes = [0]
// REPLICAS: kiln.adamw %{{.*}}, %[[SUM]],
// NOAXIS: error: kiln-optimizer: data-parallel-axes names axis 2, not an axis of the grid after 'pp' (1 to 1)
// NOREPLICAAXIS: error: kiln-optimizer: data-parallel-axes names axis 1, not an axis of the grid after 'pp' (1 to 0)

// NOBACKWARD: error: kiln-optimizer: pipeline-degree=2, but no function is a stage's backward ('kiln.stage', named ..._backward: run kiln-autodiff pipeline-stages)
// IDLE: error: kiln-optimizer: pipeline-rank=3 runs no stage: there are 3 for 4 pipeline ranks
// RANKRANGE: error: kiln-optimizer: pipeline-rank must be in [0, pipeline-degree), got pipeline-rank=2 pipeline-degree=2
// BALANCE: error: kiln-optimizer: load-balance-coeff > 0 (a MoE router's expert bias) is not supported with pipeline-degree > 1 yet

// BADSTAGE: error: kiln-autodiff: result #0 of stage @loss_stage0 is not a transfer ('kiln.transfer'); only the last stage returns the loss
// BADSTAGE: error: kiln-autodiff: @loss_stage0 must return the loss as an f32 scalar (tensor<f32>), then only f32 scalar metrics tagged 'kiln.output'

// NOSTAGES: error: kiln-autodiff: pipeline-stages, but no function is tagged 'kiln.stage' (kiln-pipeline-split makes them)

// NOFUNC: error: kiln-pipeline-split: no function @nothere
// MISSING: error: 'func.func' op kiln-pipeline-split: stage-starts names 'layers.7', which is not a module of @loss after '' in its order
// ORDER: error: 'func.func' op kiln-pipeline-split: stage-starts names 'layers.1', which is not a module of @loss after 'norm' in its order
// BACK: error: 'kiln.add' op (module 'layers.0', stage 0) uses a value of stage 1 (module 'layers.1'): a stage may only use earlier stages' values
