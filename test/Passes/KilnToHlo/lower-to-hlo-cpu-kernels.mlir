// kiln-lower-to-hlo{cpu-kernels}: for compiled mode on the CPU, a kernel with
// no Neuron custom call (CPU only) becomes a custom call to KilnCpuKernel
// whose backend_config names the kernel, its direction and options, as a
// Neuron kernel's does; compiled mode runs its CPU implementation. Without
// the option it is an error (lower-to-hlo-errors.mlir).
// RUN: kiln-opt %s --kiln-lower-to-hlo=cpu-kernels=true | FileCheck %s

// CHECK-LABEL: func.func @train_step
// CHECK: %{{.*}}:3 = hlo.custom_call %{{.*}}, %{{.*}}, %{{.*}} {backend_config = "{{.*}}\22kernel\22:\22chunked_cross_entropy\22{{.*}}\22kiln_direction\22:\22forward\22{{.*}}\22kiln_kernel\22:\22chunked_cross_entropy\22{{.*}}", call_target_name = "KilnCpuKernel"}
// CHECK-SAME: (tensor<2x4x8xf32>, tensor<16x8xf32>, tensor<2x4xi64>) -> (tensor<f32>, tensor<2x4x8xf32>, tensor<16x8xf32>)
module {
  func.func @train_step(%h: tensor<2x4x8xf32>, %w: tensor<16x8xf32>, %labels: tensor<2x4xi64>)
      -> (tensor<f32>, tensor<2x4x8xf32>, tensor<16x8xf32>) {
    %loss, %dh, %dw = kiln.kernel "chunked_cross_entropy"(%h, %w, %labels) {fqn = "loss", options = {}, rule = "fused", target = "kiln.cross_entropy"} : (tensor<2x4x8xf32>, tensor<16x8xf32>, tensor<2x4xi64>) -> (tensor<f32>, tensor<2x4x8xf32>, tensor<16x8xf32>)
    return %loss, %dh, %dw : tensor<f32>, tensor<2x4x8xf32>, tensor<16x8xf32>
  }
}
