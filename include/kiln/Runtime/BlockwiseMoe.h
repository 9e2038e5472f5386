//===- BlockwiseMoe.h - nkilib's blockwise MoE, as the NKI Library defines it -*- C++ -*-===//
//
// The semantics of the NKI Library's moe_cte (shard_on_i; SiLU; POST_SCALE;
// no bias, clamp or quantization) on its blockwise form (NkiRoutedTensor),
// as nkilib's own golden computes it (test_bwmm_bwd_common.py,
// _generate_fwd_golden): block n of B rows is expert block_to_expert[n]'s,
// row r of it token token_position_to_id[n * B + r];
//   out[t] += affinity[t, e] * down_e(silu(gate_e h_t) * up_e h_t).
// Kiln's HLO evaluator runs a call bound in that form through it, so that
// check-hlo tests the routing the lowering builds against the kernel's own
// contract, not against Kiln's kernel.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_RUNTIME_BLOCKWISEMOE_H
#define KILN_RUNTIME_BLOCKWISEMOE_H

#include "kiln/Runtime/Tensor.h"

namespace kiln::kernels {

/// hidden [T + 1, H]; affinities [(T + 1) * E, 1]; gateUp [E, H, 2, I];
/// down [E, I, H]; tokenPositions [N * B] and blockExperts [N, 1] (I32)
/// -> out [T + 1, H] in hidden's dtype (accumulated in float32). Throws
/// kiln::Error, naming `where`, on shapes that do not agree or an index out
/// of range.
Tensor blockwiseMoe(const Tensor &hidden, const Tensor &affinities, const Tensor &gateUp,
                    const Tensor &down, const Tensor &tokenPositions, const Tensor &blockExperts,
                    int64_t blockSize, const std::string &where);

} // namespace kiln::kernels

#endif // KILN_RUNTIME_BLOCKWISEMOE_H
