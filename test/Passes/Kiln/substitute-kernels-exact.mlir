// RUN: kiln-opt %s --kiln-substitute-kernels="rules=%S/Inputs/rules-flash-lenient.json" 2>%t.log | FileCheck %s
// RUN: FileCheck %s --check-prefix=LENIENT < %t.log
// RUN: not kiln-opt %s --kiln-substitute-kernels="rules=%S/Inputs/rules-flash-exact.json" 2>&1 | FileCheck %s --check-prefix=EXACT

// `exact` decides what happens to a selected node whose form the kernel does
// not implement: nki_flash_attention is causal only, this attention is not.
func.func @loss(%q: tensor<1x128x4x8xf32> {kiln.input = "q"},
                %k: tensor<1x128x2x8xf32> {kiln.input = "k"},
                %v: tensor<1x128x2x8xf32> {kiln.input = "v"})
    -> (tensor<1x128x4x8xf32>, tensor<1x4x128xf32>) {
  %o, %lse = kiln.attention %q, %k, %v {scale = 0.35 : f32, fqn = "layers.0.attention.inner_attention"}
      : (tensor<1x128x4x8xf32>, tensor<1x128x2x8xf32>, tensor<1x128x2x8xf32>)
      -> (tensor<1x128x4x8xf32>, tensor<1x4x128xf32>)
  return %o, %lse : tensor<1x128x4x8xf32>, tensor<1x4x128xf32>
}

// Not exact: the node is left as it is, with a note, and the rule that then
// replaced nothing is reported.
// CHECK: kiln.attention
// CHECK-NOT: kiln.kernel
// LENIENT: [Override] flash: left layers.0.attention.inner_attention kiln.attention: it is not causal (the kernel is causal only)
// LENIENT: [Override] 0 nodes replaced by 0 of 1 rule
// LENIENT: warning: override rule 'flash' ({{.*}}) matched nothing

// Exact: the rule insists, so it is an error naming the node and the reason.
// EXACT: error: override rule 'flash' (exact): layers.0.attention.inner_attention (kiln.attention) cannot take kernel 'nki_flash_attention': it is not causal (the kernel is causal only)
