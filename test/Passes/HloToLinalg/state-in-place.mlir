// The state a step updates is written into the old state's buffer where
// the lowered code allows it. kiln-convert-hlo-to-linalg records which
// argument each result updates (kiln.param / kiln.state of one name, the
// pairs the Neuron artifact must-aliases) before it strips the names;
// kiln-compact-buffers keeps the out-parameters that may take their
// argument's buffer (compact-buffers.mlir has the rules), the attribute
// compiled mode's runner reads on the LLVM function.
// RUN: kiln-opt %s --kiln-convert-hlo-to-linalg | FileCheck %s
// RUN: kiln-opt %s --kiln-hlo-to-llvm | FileCheck %s --check-prefix=LLVM

// w is read again after its update (the loss's reduction recomputes the
// fused w * x): a buffer of its own. m's update reads m where it writes it
// (the transposed m is a copy made before): shared. The loss updates
// nothing.
// CHECK-LABEL: func.func @train_step
// CHECK-NOT: kiln.param
// CHECK-SAME: kiln.input_output_alias = array<i64: 0, 1, -1>
// LLVM-LABEL: llvm.func @train_step(
// LLVM-SAME: kiln.out_param_buffers = array<i64: -1, 1, -1>
// LLVM-NOT: kiln.input_output_alias
func.func @train_step(%w: tensor<4x8xf32> {kiln.param = "w"}, %m: tensor<4x4xf32> {kiln.state = "exp_avg.w"},
                      %x: tensor<4x8xf32> {kiln.input = "x"})
    -> (tensor<4x8xf32> {kiln.param = "w"}, tensor<4x4xf32> {kiln.state = "exp_avg.w"},
        tensor<f32> {kiln.output = "loss"}) {
  %wx = hlo.multiply %w, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %w2 = hlo.subtract %w, %wx : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %mt = hlo.transpose %m {permutation = array<i64: 1, 0>} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %m2 = hlo.add %mt, %m : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %zero = hlo.constant {value = dense<0.0> : tensor<f32>} : tensor<f32>
  %loss = hlo.reduce %wx, %zero {dimensions = array<i64: 0, 1>, combiner = #hlo<combiner add>} : (tensor<4x8xf32>, tensor<f32>) -> tensor<f32>
  return %w2, %m2, %loss : tensor<4x8xf32>, tensor<4x4xf32>, tensor<f32>
}
