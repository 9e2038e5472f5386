// RUN: kiln-opt %s --kiln-substitute-kernels="rules=%S/Inputs/rules-all.json target=cpu" 2>%t.log | FileCheck %s
// RUN: FileCheck %s --check-prefix=LOG < %t.log
// RUN: kiln-opt %s --kiln-substitute-kernels="rules=%S/Inputs/rules-all.json target=cpu" --kiln-autodiff 2>/dev/null | FileCheck %s --check-prefix=VJP
// RUN: not kiln-opt %s --kiln-substitute-kernels="rules=%S/Inputs/rules-all.json" 2>&1 | FileCheck %s --check-prefix=CPU-ONLY
// RUN: not kiln-opt %s --kiln-substitute-kernels="rules=%S/Inputs/rules-rope.json lnc=4" 2>&1 | FileCheck %s --check-prefix=LNC
// RUN: not kiln-opt %s --kiln-substitute-kernels="rules=%S/Inputs/rules-unknown-kernel.json" 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// RUN: not kiln-opt %s --kiln-substitute-kernels="rules=%S/Inputs/rules-wrong-target.json" 2>&1 | FileCheck %s --check-prefix=TARGET
// RUN: not kiln-opt %s --kiln-substitute-kernels="rules=%S/Inputs/rules-unknown-option.json" 2>&1 | FileCheck %s --check-prefix=OPTION
// RUN: not kiln-opt %s --kiln-substitute-kernels="rules=%S/Inputs/rules-option-none.json" 2>&1 | FileCheck %s --check-prefix=NOOPTION
// RUN: not kiln-opt %s --kiln-substitute-kernels="rules=%S/Inputs/rules-bad-glob.json" 2>&1 | FileCheck %s --check-prefix=GLOB
// RUN: not kiln-opt %s --kiln-substitute-kernels="rules=%S/Inputs/rules-conflict.json" 2>&1 | FileCheck %s --check-prefix=CONFLICT
// RUN: not kiln-opt %s --kiln-substitute-kernels="rules=%S/Inputs/rules-unknown-key.json" 2>&1 | FileCheck %s --check-prefix=KEY
// RUN: kiln-opt %s --kiln-substitute-kernels="rules=%S/Inputs/rules-nothing.json" 2>&1 >/dev/null | FileCheck %s --check-prefix=NOTHING
// RUN: kiln-opt %s --kiln-substitute-kernels="rules=%S/Inputs/rules-nothing.json log=false" 2>&1 >/dev/null | count 0

// kiln-substitute-kernels (passes/Kiln/SubstituteKernels.cpp) with rule files read
// by lib/Config/OverrideRules.cpp (Inputs/rules-*.json).

// One attention block and the loss: q and k get RoPE, then causal GQA
// attention, then the output projection and cross-entropy.
func.func @loss(%q: tensor<1x256x4x8xf32> {kiln.input = "q"},
                %k: tensor<1x256x2x8xf32> {kiln.input = "k"},
                %v: tensor<1x256x2x8xf32> {kiln.input = "v"},
                %labels: tensor<1x256xi64> {kiln.input = "labels"},
                %w: tensor<16x32xf32> {kiln.param = "lm_head.weight"}) -> tensor<f32> {
  %cache = kiln.rope_cache {theta = 1.0e6 : f64, seq_len = 256 : i64, head_dim = 8 : i64,
                            fqn = "rope_cache"} : tensor<256x16xf32>
  %qr, %kr = kiln.rope %q, %k, %cache {fqn = "layers.0.attention.rope"}
      : (tensor<1x256x4x8xf32>, tensor<1x256x2x8xf32>, tensor<256x16xf32>)
      -> (tensor<1x256x4x8xf32>, tensor<1x256x2x8xf32>)
  %o, %lse = kiln.attention %qr, %kr, %v {causal, scale = 0.35 : f32,
                                         fqn = "layers.0.attention.inner_attention"}
      : (tensor<1x256x4x8xf32>, tensor<1x256x2x8xf32>, tensor<1x256x2x8xf32>)
      -> (tensor<1x256x4x8xf32>, tensor<1x4x256xf32>)
  %m = kiln.reshape %o {shape = array<i64: 1, 256, 32>, fqn = "layers.0.attention.merge"}
      : (tensor<1x256x4x8xf32>) -> tensor<1x256x32xf32>
  %logits = kiln.linear %m, %w {fqn = "output"}
      : (tensor<1x256x32xf32>, tensor<16x32xf32>) -> tensor<1x256x16xf32>
  %loss = kiln.cross_entropy %logits, %labels {fqn = "loss"}
      : (tensor<1x256x16xf32>, tensor<1x256xi64>) -> tensor<f32>
  return %loss : tensor<f32>
}

// One line per replaced node in the seeds' form, then the total.
// LOG: [Override] nki_rope: layers.0.attention.rope kiln.rope -> nki_rope
// LOG-NEXT: [Override] flash: layers.0.attention.inner_attention kiln.attention -> nki_flash_attention
// LOG-NEXT: [Override] fused_loss: loss kiln.cross_entropy -> chunked_cross_entropy
// LOG-NEXT: [Override] 3 nodes replaced by 3 of 3 rules
// LOG-NOT: warning

// q and k are transposed into NKI's [b, heads, s, d]; rope's outputs feed
// the flash kernel in that layout (the transposes back and forth fold), and
// only the attention output goes back to Kiln's [b, s, heads, d].
// CHECK-LABEL: func.func @loss(
// CHECK: %[[CACHE:.*]] = kiln.rope_cache
// CHECK: %[[QT:.*]] = kiln.transpose %arg0 {fqn = "layers.0.attention.rope", permutation = array<i64: 0, 2, 1, 3>} : (tensor<1x256x4x8xf32>) -> tensor<1x4x256x8xf32>
// CHECK: %[[KT:.*]] = kiln.transpose %arg1 {{.*}} -> tensor<1x2x256x8xf32>
// CHECK: %[[ROPE:.*]]:2 = kiln.kernel "nki_rope"(%[[QT]], %[[KT]], %[[CACHE]]) {fqn = "layers.0.attention.rope", options = {}, rule = "nki_rope", target = "kiln.rope"}
// CHECK-NOT: kiln.transpose %[[ROPE]]
// CHECK: %[[VT:.*]] = kiln.transpose %arg2 {fqn = "layers.0.attention.inner_attention", {{.*}}} : (tensor<1x256x2x8xf32>) -> tensor<1x2x256x8xf32>
// CHECK: %[[ATTN:.*]]:2 = kiln.kernel "nki_flash_attention"(%[[ROPE]]#0, %[[ROPE]]#1, %[[VT]]) {fqn = "layers.0.attention.inner_attention", options = {causal = true, scale = 3.500000e-01 : f32}, rule = "flash", target = "kiln.attention"} {{.*}} -> (tensor<1x4x256x8xf32>, tensor<1x4x256xf32>)
// CHECK: %[[O:.*]] = kiln.transpose %[[ATTN]]#0 {{.*}} -> tensor<1x256x4x8xf32>
// CHECK: %[[M:.*]] = kiln.reshape %[[O]]
// The fused loss takes the projection's input and weight: no logits.
// CHECK-NOT: kiln.linear
// CHECK: %[[CE:.*]]:3 = kiln.kernel "chunked_cross_entropy"(%[[M]], %arg4, %arg3) {fqn = "loss", options = {chunk_rows = 64 : i64}, rule = "fused_loss", target = "kiln.cross_entropy"} : (tensor<1x256x32xf32>, tensor<16x32xf32>, tensor<1x256xi64>) -> (tensor<f32>, tensor<1x256x32xf32>, tensor<16x32xf32>)
// CHECK: return %[[CE]]#0

// Each kernel's VJP is its own backward, on the same rule and module, in
// the kernel's layout; the cotangents are transposed like the values.
// VJP-LABEL: func.func @loss_grad(
// VJP: %[[CE:.*]]:3 = kiln.kernel "chunked_cross_entropy"{{.*}}kiln.saved = array<i64: 1, 2>
// VJP: %[[SEED:.*]] = kiln.constant {fqn = "loss.seed_grad"
// VJP: %[[DCE:.*]]:2 = kiln.kernel_backward "chunked_cross_entropy"(%[[SEED]], %[[CE]]#1, %[[CE]]#2) {fqn = "loss", {{.*}}rule = "fused_loss"
// VJP: %[[DO:.*]] = kiln.transpose
// VJP: kiln.kernel_backward "nki_flash_attention"(%[[DO]], {{.*}}) {fqn = "layers.0.attention.inner_attention"
// VJP: kiln.kernel_backward "nki_rope"({{.*}}) {fqn = "layers.0.attention.rope"
// VJP: return {{.*}} : tensor<f32>, tensor<16x32xf32>

// chunked_cross_entropy has no NKI kernel: on trn2 it is a constraint error.
// CPU-ONLY: error: override rule 'fused_loss': loss (kiln.cross_entropy) violates the constraint of kernel 'chunked_cross_entropy' on target trn2 (lnc 2): target.name == "cpu" (a CPU-only kernel, without a Neuron implementation, checked against "trn2": kiln train and calibrate-cpu check kernels against cpu and kiln compile, check-hlo, capture and plan against trn2, unless target.name says otherwise)

// rope_hf tiles the sequence in 128 * lnc rows.
// LNC: error: override rule 'nki_rope': layers.0.attention.rope (kiln.rope) violates the constraint of kernel 'nki_rope' on target trn2 (lnc 4): seq % (128 * lnc) == 0 (seq = 256, 128 * lnc = 512)

// UNKNOWN: error: kiln-substitute-kernels: {{.*}}rules-unknown-kernel.json: rule 'typo': unknown kernel 'nki_ropes' (registered: chunked_cross_entropy, nki_flash_attention, nki_grouped_experts, nki_rms_norm, nki_rope)
// TARGET: error: kiln-substitute-kernels: {{.*}}rules-wrong-target.json: rule 'mixup': kernel 'nki_rope' implements 'kiln.rope', not the target 'kiln.attention'
// A typo in an option, and an option for a kernel that takes none.
// OPTION: error: kiln-substitute-kernels: {{.*}}rules-unknown-option.json: rule 'fused': kernel 'chunked_cross_entropy' has no option 'chunk_row' (its options: chunk_rows)
// NOOPTION: error: kiln-substitute-kernels: {{.*}}rules-option-none.json: rule 'rope': kernel 'nki_rope' has no option 'theta' (it takes none)
// GLOB: error: kiln-substitute-kernels: {{.*}}rules-bad-glob.json: rule 'glob': bad glob 'layers.[0-9.attention.rope' in fqns: '[' at offset 7 is never closed by ']'
// CONFLICT: error: override rules 'first' and 'second' both claim layers.0.attention.rope (kiln.rope)
// kiln-opt names the op without dumping the module after it.
// CONFLICT-NOT: see current operation
// KEY: error: kiln-substitute-kernels: {{.*}}rules-unknown-key.json: rule 'rope': unknown key 'fqn' (known: name, target, exact, fqns, kernel, options, description)

// A rule that selects nothing is a warning; the others still apply.
// NOTHING: [Override] nki_rope: layers.0.attention.rope kiln.rope -> nki_rope
// NOTHING: [Override] 1 node replaced by 1 of 2 rules
// NOTHING: warning: override rule 'late_layers' ({{.*}}rules-nothing.json) matched nothing: no kiln.rope node at layers.1[0-9].attention.rope it could replace
