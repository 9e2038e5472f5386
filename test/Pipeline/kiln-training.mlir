// The registered kiln-training pipeline (lib/Pipeline/KilnPipeline.cpp) with its default options (one rank, float32): @loss -> @loss_grad ->
// @train_step; the upstream cleanup passes run on the result and keep it
// valid.
// RUN: kiln-opt %s --kiln-training | FileCheck %s
// RUN: kiln-opt %s --kiln-training --canonicalize --cse | FileCheck %s --check-prefix=CLEAN

func.func @loss(%ids: tensor<1x2xi64> {kiln.input = "input_ids"},
                %labels: tensor<1x2xi64> {kiln.input = "labels"},
                %table: tensor<8x4xf32> {kiln.param = "model.embed_tokens.weight"},
                %norm: tensor<4xf32> {kiln.param = "model.norm.weight"}) -> tensor<f32> {
  %h = kiln.embedding %table, %ids {fqn = "tok_embeddings"} : (tensor<8x4xf32>, tensor<1x2xi64>) -> tensor<1x2x4xf32>
  %n = kiln.rms_norm %h, %norm {eps = 1.0e-6 : f32, fqn = "norm"} : (tensor<1x2x4xf32>, tensor<4xf32>) -> tensor<1x2x4xf32>
  %logits = kiln.linear %n, %table {fqn = "output"} : (tensor<1x2x4xf32>, tensor<8x4xf32>) -> tensor<1x2x8xf32>
  %loss = kiln.cross_entropy %logits, %labels {fqn = "loss"} : (tensor<1x2x8xf32>, tensor<1x2xi64>) -> tensor<f32>
  return %loss : tensor<f32>
}

// CHECK-LABEL: func.func @loss_grad(
// CHECK-LABEL: func.func @train_step(
// CHECK-SAME: tensor<f32> {kiln.output = "loss"}, tensor<f32> {kiln.output = "grad_norm"}
// CHECK: kiln.lr_schedule {{.*}}decay_type = #kiln.decay_type<linear>, fqn = "lr_scheduler", lr = 8.000000e-04 : f64
// CHECK-COUNT-2: kiln.adamw


// CLEAN-LABEL: func.func @train_step(
// CLEAN-COUNT-2: kiln.adamw
// CLEAN: return
