// kiln-expert-dispatch: each grouped_experts through a capacity buffer of
// `groups` expert blocks x `chunks` token chunks. 4 x 3 tokens in 2 chunks of
// 6, top-2 of 4 experts in 2 blocks: a chunk sends a block at most
// 6 x min(2, 2) = 12 pairs (dropless); capacity factor 1 gives an even share,
// ceil(6 x 2 / 2) = 6.
// RUN: kiln-opt %s --kiln-expert-dispatch="groups=2 chunks=2" | FileCheck %s
// RUN: kiln-opt %s --kiln-expert-dispatch="groups=2 chunks=2 capacity-factor=1.0" | FileCheck %s --check-prefix=CF
// RUN: kiln-opt %s --kiln-expert-dispatch="groups=4 chunks=1" | FileCheck %s --check-prefix=G4
// RUN: not kiln-opt %s --kiln-expert-dispatch="groups=2 chunks=3" 2>&1 | FileCheck %s --check-prefix=CHUNKS
// RUN: not kiln-opt %s --kiln-expert-dispatch="groups=3" 2>&1 | FileCheck %s --check-prefix=GROUPS
// RUN: not kiln-opt %s --kiln-expert-dispatch="capacity-factor=-1" 2>&1 | FileCheck %s --check-prefix=CAP
// RUN: not kiln-opt %s --kiln-substitute-kernels="rules=%S/Inputs/rules-experts.json target=cpu log=false" --kiln-expert-dispatch="groups=2" 2>&1 | FileCheck %s --check-prefix=KERNEL

func.func @experts(%x: tensor<4x3x8xf32>, %w: tensor<4x3x2xf32>, %e: tensor<4x3x2xi64>,
                   %w1: tensor<4x6x8xf32>, %w3: tensor<4x6x8xf32>, %w2: tensor<4x8x6xf32>)
    -> tensor<4x3x8xf32> {
  %y = kiln.grouped_experts %x, %w, %e, %w1, %w3, %w2 {fqn = "layers.0.moe.experts"} : (tensor<4x3x8xf32>, tensor<4x3x2xf32>, tensor<4x3x2xi64>, tensor<4x6x8xf32>, tensor<4x6x8xf32>, tensor<4x8x6xf32>) -> tensor<4x3x8xf32>
  return %y : tensor<4x3x8xf32>
}

// CHECK-LABEL: func.func @experts(
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<4x3x8xf32>, %[[W:[a-z0-9]+]]: tensor<4x3x2xf32>, %[[E:[a-z0-9]+]]: tensor<4x3x2xi64>, %[[W1:[a-z0-9]+]]: tensor<4x6x8xf32>, %[[W3:[a-z0-9]+]]: tensor<4x6x8xf32>, %[[W2:[a-z0-9]+]]: tensor<4x8x6xf32>
// CHECK-NEXT: %[[ROWS:.*]], %[[RW:.*]], %[[RE:.*]], %[[SLOTS:.*]] = kiln.expert_dispatch %[[X]], %[[W]], %[[E]] {capacity = 12 : i64, chunks = 2 : i64, fqn = "layers.0.moe.experts", groups = 2 : i64, num_experts = 4 : i64} : (tensor<4x3x8xf32>, tensor<4x3x2xf32>, tensor<4x3x2xi64>) -> (tensor<2x24x8xf32>, tensor<2x24x1xf32>, tensor<2x24x1xi64>, tensor<4x3x2xi64>)
// CHECK-NEXT: %[[OUT:.*]] = kiln.grouped_experts %[[ROWS]], %[[RW]], %[[RE]], %[[W1]], %[[W3]], %[[W2]] {blocked, fqn = "layers.0.moe.experts"} : (tensor<2x24x8xf32>, tensor<2x24x1xf32>, tensor<2x24x1xi64>, tensor<4x6x8xf32>, tensor<4x6x8xf32>, tensor<4x8x6xf32>) -> tensor<2x24x8xf32>
// CHECK-NEXT: %[[Y:.*]] = kiln.expert_combine %[[SLOTS]], %[[OUT]] {chunks = 2 : i64, fqn = "layers.0.moe.experts"} : (tensor<4x3x2xi64>, tensor<2x24x8xf32>) -> tensor<4x3x8xf32>
// CHECK-NEXT: return %[[Y]]

// CF: kiln.expert_dispatch {{.*}}capacity = 6 : i64{{.*}} -> (tensor<2x12x8xf32>, tensor<2x12x1xf32>, tensor<2x12x1xi64>, tensor<4x3x2xi64>)
// One block per expert: a token sends each at most one pair, 12 in all.
// G4: kiln.expert_dispatch {{.*}}capacity = 12 : i64, chunks = 1 : i64{{.*}}groups = 4 : i64{{.*}} -> (tensor<4x12x8xf32>,
// CHUNKS: 'kiln.grouped_experts' op (fqn 'layers.0.moe.experts'): kiln-expert-dispatch: chunks=3 must divide the batch of 4 rows
// GROUPS: 'kiln.grouped_experts' op (fqn 'layers.0.moe.experts'): kiln-expert-dispatch: groups=3 must divide the 4 experts
// CAP: kiln-expert-dispatch: groups and chunks must be >= 1 and capacity-factor >= 0, got 1, 1 and -1
// KERNEL: kiln-expert-dispatch: rule 'experts' put kernel 'nki_grouped_experts' in place of kiln.grouped_experts; the all-to-all dispatcher needs the op itself
