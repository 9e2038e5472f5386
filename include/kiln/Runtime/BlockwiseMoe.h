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

struct BlockwiseMoeOutputs {
  Tensor out;               ///< [T + 1, H] in hidden's dtype
  Tensor gateUpActivations; ///< [N, 2, I, B] in gateUp's dtype (checkpoint only)
  Tensor downActivations;   ///< [N, B, H] in down's dtype (checkpoint only)
};

/// hidden [T + 1, H]; affinities [(T + 1) * E, 1]; gateUp [E, H, 2, I];
/// down [E, I, H]; tokenPositions [N * B] and blockExperts [N, 1] (I32)
/// -> out [T + 1, H] (accumulated in float32) and, with `checkpoint`
/// (shard_on_i's checkpoint_activation), each block row's gate and up
/// projections and down projection, as blockwise_mm_bwd takes them.
/// Throws kiln::Error, naming `where`, on shapes that do not agree or an
/// index out of range.
BlockwiseMoeOutputs blockwiseMoe(const Tensor &hidden, const Tensor &affinities,
                                 const Tensor &gateUp, const Tensor &down,
                                 const Tensor &tokenPositions, const Tensor &blockExperts,
                                 int64_t blockSize, bool checkpoint, const std::string &where);

struct BlockwiseMoeGrads {
  Tensor hidden, affinities, gateUp, down; ///< the shapes and dtypes of the inputs
};

/// The NKI Library's blockwise_mm_bwd (dropless, SiLU, affinity on H, no
/// bias or clamp) as nkilib's golden computes it (_generate_bwd_golden):
/// per block row of expert e and token t, from the checkpointed gate, up
/// and down projections and outputGrad [T + 1, H],
///   d affinity[t, e] = <dout_t, down_row>, the row's down gradient
///   dout_t * affinity[t, e], then SwiGLU's and the projections' gradients.
BlockwiseMoeGrads blockwiseMoeBackward(const Tensor &hidden, const Tensor &affinities,
                                       const Tensor &gateUp, const Tensor &down,
                                       const Tensor &gateUpActivations,
                                       const Tensor &downActivations, const Tensor &tokenPositions,
                                       const Tensor &blockExperts, const Tensor &outputGrad,
                                       int64_t blockSize, const std::string &where);

} // namespace kiln::kernels

#endif // KILN_RUNTIME_BLOCKWISEMOE_H
