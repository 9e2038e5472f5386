// kiln-mixed-precision: torchtitan's bf16 casts as kiln.cast on @loss, each
// value once: parameters where they enter (the tied table once for the
// embedding and the output projection), each linear's activation operand
// and result. Differentiation then rounds the cotangent of every cast value
// (bf16 gradients) and the gradients leave in float32.
// RUN: kiln-opt %s --kiln-mixed-precision=param=bfloat16 | FileCheck %s
// RUN: kiln-opt %s --kiln-mixed-precision=param=bfloat16 --kiln-autodiff | FileCheck %s --check-prefix=GRAD
// float32 (the CPU default) leaves @loss as it is.
// RUN: kiln-opt %s --kiln-mixed-precision=param=float32 | FileCheck %s --check-prefix=F32
// Bad values are errors naming the option.
// RUN: not kiln-opt %s --kiln-mixed-precision=param=fp8 2>&1 | FileCheck %s --check-prefix=BADPARAM
// RUN: not kiln-opt %s --kiln-mixed-precision="param=bfloat16 reduce=bfloat16" 2>&1 | FileCheck %s --check-prefix=BADREDUCE

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

// CHECK-LABEL: func.func @loss(
// CHECK-NEXT: %[[TABLE:.*]] = kiln.cast %arg2 {fqn = "tok_embeddings", to = bf16} : (tensor<8x4xf32>) -> tensor<8x4xf32>
// CHECK-NEXT: %[[NORMW:.*]] = kiln.cast %arg3 {fqn = "norm", to = bf16} : (tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT: %[[H:.*]] = kiln.embedding %[[TABLE]], %arg0
// CHECK-NEXT: %[[N:.*]] = kiln.rms_norm %[[H]], %[[NORMW]]
// CHECK-NEXT: %[[NB:.*]] = kiln.cast %[[N]] {fqn = "norm", to = bf16}
// CHECK-NEXT: %[[Y:.*]] = kiln.linear %[[NB]], %[[TABLE]] {fqn = "output"}
// CHECK-NEXT: %[[YB:.*]] = kiln.cast %[[Y]] {fqn = "output", to = bf16}
// CHECK-NEXT: kiln.cross_entropy %[[YB]], %arg1
// CHECK-NOT: kiln.cast

// GRAD-LABEL: func.func @loss_grad(
// GRAD: %[[DLOGITS:.*]] = kiln.cross_entropy_backward
// GRAD-NEXT: %[[DY:.*]] = kiln.cast %[[DLOGITS]] {fqn = "output", to = bf16}
// GRAD-DAG: kiln.linear_backward_data %[[DY]]
// GRAD-DAG: kiln.linear_backward_weight %[[DY]]
// The table's two cotangents are summed in float32, then rounded once.
// GRAD: %[[SUM:.*]] = kiln.add
// GRAD: %[[DTABLE:.*]] = kiln.cast %[[SUM]] {fqn = "tok_embeddings", to = bf16}
// GRAD: return {{.*}}%[[DTABLE]]

// F32-LABEL: func.func @loss(
// F32-NOT: kiln.cast

// BADPARAM: for the --param option: 'fp8' is not one of float32, bfloat16
// BADREDUCE: reduce (training.mixed_precision_reduce) is 'bfloat16'; expected "float32"
