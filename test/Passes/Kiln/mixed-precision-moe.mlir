// kiln-mixed-precision on a MoE layer: the routed experts round as a dense
// MLP's linears do. Their input and result get kiln.cast ops (the
// dispatcher's input, the buffer the experts read, their output rows and the
// combined result when kiln-expert-dispatch ran first), and the op itself
// round_to = bf16 for what it computes inside (gate and up projections, the
// SwiGLU product, each expert's output). Differentiation carries round_to
// to the backward op and rounds every cast value's cotangent. In HLO every
// expert GEMM then multiplies bf16 values, and the dispatcher gathers bf16
// rows (what its all-to-alls move).
// RUN: kiln-opt %s --kiln-mixed-precision=param=bfloat16 | FileCheck %s --check-prefix=PLAIN
// RUN: kiln-opt %s --kiln-expert-dispatch="groups=2 chunks=2" --kiln-mixed-precision=param=bfloat16 \
// RUN:   | FileCheck %s --check-prefix=DISPATCH
// RUN: kiln-opt %s --kiln-expert-dispatch="groups=2 chunks=2" --kiln-mixed-precision=param=bfloat16 \
// RUN:   --kiln-autodiff | FileCheck %s --check-prefix=GRAD
// RUN: kiln-opt %s --kiln-expert-dispatch="groups=2 chunks=2" --kiln-mixed-precision=param=bfloat16 \
// RUN:   --kiln-autodiff --kiln-lower-to-hlo=func=loss_grad --kiln-hlo-sink-converts --cse \
// RUN:   | FileCheck %s --check-prefix=HLO
// float32 sets nothing.
// RUN: kiln-opt %s --kiln-mixed-precision=param=float32 | FileCheck %s --check-prefix=F32

func.func @loss(%x: tensor<4x3x8xf32>, %w: tensor<4x3x2xf32>, %e: tensor<4x3x2xi64>,
                %labels: tensor<4x3xi64> {kiln.input = "labels"},
                %w1: tensor<4x6x8xf32> {kiln.param = "model.layers.0.mlp.experts.gate_proj.weight"},
                %w3: tensor<4x6x8xf32> {kiln.param = "model.layers.0.mlp.experts.up_proj.weight"},
                %w2: tensor<4x8x6xf32> {kiln.param = "model.layers.0.mlp.experts.down_proj.weight"})
    -> tensor<f32> {
  %y = kiln.grouped_experts %x, %w, %e, %w1, %w3, %w2 {fqn = "layers.0.moe.experts"} : (tensor<4x3x8xf32>, tensor<4x3x2xf32>, tensor<4x3x2xi64>, tensor<4x6x8xf32>, tensor<4x6x8xf32>, tensor<4x8x6xf32>) -> tensor<4x3x8xf32>
  %loss = kiln.cross_entropy %y, %labels {fqn = "loss"} : (tensor<4x3x8xf32>, tensor<4x3xi64>) -> tensor<f32>
  return %loss : tensor<f32>
}

// PLAIN-LABEL: func.func @loss(
// PLAIN-NEXT: %[[X:.*]] = kiln.cast %arg0 {fqn = "layers.0.moe.experts", to = bf16}
// PLAIN-NEXT: %[[W1:.*]] = kiln.cast %arg4
// PLAIN-NEXT: %[[W3:.*]] = kiln.cast %arg5
// PLAIN-NEXT: %[[W2:.*]] = kiln.cast %arg6
// PLAIN-NEXT: %[[Y:.*]] = kiln.grouped_experts %[[X]], %arg1, %arg2, %[[W1]], %[[W3]], %[[W2]] {fqn = "layers.0.moe.experts", round_to = bf16}
// PLAIN-NEXT: %[[YB:.*]] = kiln.cast %[[Y]] {fqn = "layers.0.moe.experts", to = bf16}
// PLAIN-NEXT: kiln.cross_entropy %[[YB]], %arg3

// DISPATCH-LABEL: func.func @loss(
// DISPATCH: %[[X:.*]] = kiln.cast %arg0 {fqn = "layers.0.moe.experts", to = bf16}
// DISPATCH: %[[ROWS:.*]], %[[RW:.*]], %[[RE:.*]], %[[SLOTS:.*]] = kiln.expert_dispatch %[[X]], %arg1, %arg2
// DISPATCH-NEXT: %[[RB:.*]] = kiln.cast %[[ROWS]] {fqn = "layers.0.moe.experts", to = bf16}
// DISPATCH-NEXT: %[[OUT:.*]] = kiln.grouped_experts %[[RB]], %[[RW]], %[[RE]], {{.*}} {blocked, fqn = "layers.0.moe.experts", round_to = bf16}
// DISPATCH-NEXT: %[[OB:.*]] = kiln.cast %[[OUT]] {fqn = "layers.0.moe.experts", to = bf16}
// DISPATCH-NEXT: %[[Y:.*]] = kiln.expert_combine %[[SLOTS]], %[[OB]]
// DISPATCH-NEXT: %[[YB:.*]] = kiln.cast %[[Y]] {fqn = "layers.0.moe.experts", to = bf16}
// DISPATCH-NEXT: kiln.cross_entropy %[[YB]], %arg3

// GRAD-LABEL: func.func @loss_grad(
// GRAD: %[[DY:.*]] = kiln.cross_entropy_backward
// GRAD-NEXT: %[[DYB:.*]] = kiln.cast %[[DY]] {fqn = "layers.0.moe.experts", to = bf16}
// GRAD-NEXT: %[[DOUT:.*]] = kiln.expert_combine_backward %[[DYB]]
// GRAD-NEXT: %[[DOUTB:.*]] = kiln.cast %[[DOUT]] {fqn = "layers.0.moe.experts", to = bf16}
// GRAD-NEXT: %[[DX:[^,]+]], {{.*}} = kiln.grouped_experts_backward %[[DOUTB]], {{.*}} {blocked, fqn = "layers.0.moe.experts", round_to = bf16}
// GRAD-NEXT: %[[DXB:.*]] = kiln.cast %[[DX]] {fqn = "layers.0.moe.experts", to = bf16}
// GRAD-NEXT: kiln.expert_dispatch_backward %{{.*}}, %[[DXB]]

// The tokens are rounded once and the buffer is gathered from a bf16 table
// (zero row in front); every expert GEMM, forward and backward, is a dot of
// bf16 operands with a float32 result. Only the routing weights' dot (the
// weighted sum over experts) stays float32.
// HLO-LABEL: func.func @loss_grad(
// HLO: %[[X:.*]] = hlo.convert %arg0 : (tensor<4x3x8xf32>) -> tensor<4x3x8xbf16>
// HLO: %[[XT:.*]] = hlo.pad {{.*}} : (tensor<12x8xbf16>, tensor<bf16>) -> tensor<13x8xbf16>
// HLO: hlo.gather %[[XT]], {{.*}} : (tensor<13x8xbf16>, tensor<48xi32>) -> tensor<48x8xbf16>
// HLO: hlo.dot_general {{.*}} : (tensor<48x8xbf16>, tensor<4x6x8xbf16>) -> tensor<48x4x6xf32>
// HLO: hlo.dot_general {{.*}} : (tensor<48x8xbf16>, tensor<4x6x8xbf16>) -> tensor<48x4x6xf32>
// HLO: hlo.dot_general {{.*}} : (tensor<4x48x6xbf16>, tensor<4x8x6xbf16>) -> tensor<4x48x8xf32>
// HLO: hlo.dot_general {{.*}} : (tensor<4x48x8xf32>, tensor<48x4xf32>) -> tensor<48x8xf32>
// The combine gathers bf16 expert rows.
// HLO: hlo.gather {{.*}} : (tensor<49x8xbf16>, tensor<2x6x2xi32>) -> tensor<2x6x2x8xbf16>
// HLO: hlo.dot_general {{.*}} : (tensor<4x48x8xbf16>, tensor<4x8x6xbf16>) -> tensor<4x48x6xf32>
// HLO: hlo.dot_general {{.*}} : (tensor<4x48x8xbf16>, tensor<4x48x6xbf16>) -> tensor<4x8x6xf32>
// HLO: hlo.dot_general {{.*}} : (tensor<4x48x6xbf16>, tensor<48x8xbf16>) -> tensor<4x6x8xf32>
// HLO: hlo.dot_general {{.*}} : (tensor<4x48x6xbf16>, tensor<48x8xbf16>) -> tensor<4x6x8xf32>
// HLO-NOT: hlo.dot_general

// F32-LABEL: func.func @loss(
// F32-NOT: kiln.cast
// F32-NOT: round_to
