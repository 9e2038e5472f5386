//===- ExpertDispatchKernels.h - Host kernels of the token dispatcher -*- C++ -*-===//
//
// kiln.expert_dispatch / expert_combine and their VJPs (KilnExpertDispatchOps.td):
// the routed (token, expert) pairs of each of `chunks` token chunks placed
// into `capacity` rows per block of experts, first choices first, and each
// token's rows summed back. Float tensors F32, slots and ids I64; a slot
// g * capacity + c addresses row c of block g within its token's chunk.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_RUNTIME_EXPERTDISPATCHKERNELS_H
#define KILN_RUNTIME_EXPERTDISPATCHKERNELS_H

#include "kiln/Runtime/Tensor.h"

#include <cstdint>
#include <utility>

namespace kiln::kernels {

/// The buffer's layout: `groups` blocks of `chunks * capacity` rows.
struct DispatchLayout {
  int64_t groups = 1, chunks = 1, capacity = 1;
  int64_t rows() const { return chunks * capacity; }
};

struct DispatchOutputs {
  Tensor rows;       ///< [groups, chunks * capacity, H]: x's row of each kept pair, 0 unfilled
  Tensor rowWeights; ///< [groups, chunks * capacity, 1]: its routing weight, 0 unfilled
  Tensor rowExperts; ///< [groups, chunks * capacity, 1] I64: its expert, -1 unfilled
  Tensor slots;      ///< [..., k] I64: each pair's slot, -1 when dropped
};

/// x [B, ..., H]; weights, experts [B, ..., k]; experts in `numExperts`
/// split into `layout.groups` contiguous blocks. Pairs beyond a block's
/// capacity in a chunk are dropped, later slots first (slot-major order).
DispatchOutputs expertDispatch(const Tensor &x, const Tensor &weights, const Tensor &experts,
                               DispatchLayout layout, int64_t numExperts);

/// out[t] = sum of rows[slot] over t's kept slots, ascending; rows
/// [groups, chunks * capacity, H], slots [B, ..., k] -> [B, ..., H].
Tensor expertCombine(const Tensor &slots, const Tensor &rows, int64_t chunks);

/// VJP of expertCombine: each kept slot's row gets its token's gradient.
Tensor expertCombineBackward(const Tensor &dout, const Tensor &slots, DispatchLayout layout);

/// VJP of expertDispatch: (d x, d weights) from the rows' and row weights'
/// cotangents.
std::pair<Tensor, Tensor> expertDispatchBackward(const Tensor &slots, const Tensor &dRows,
                                                 const Tensor &dRowWeights, int64_t chunks);

} // namespace kiln::kernels

#endif // KILN_RUNTIME_EXPERTDISPATCHKERNELS_H
