//===- FlashAttention.h - Tiled attention with online softmax ---*- C++ -*-===//
//
// FlashAttention-2 style CPU kernels in the head-major layout of the NKI
// kernel they substitute for: q [b, heads, s, d], k/v [b, kvHeads, s, d]
// (GQA: query head h reads kv head h / (heads / kvHeads)). They compute the
// same quantities as kernels::attention / attentionBackward (whose layout is
// [b, s, heads, d]) without ever holding an [s, s] score matrix: blocks of
// queries meet blocks of keys, O((block + d) * block) scratch per thread.
// Results do not depend on the number of OpenMP threads.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_RUNTIME_FLASHATTENTION_H
#define KILN_RUNTIME_FLASHATTENTION_H

#include "kiln/Runtime/Tensor.h"

#include <cstdint>
#include <tuple>
#include <utility>

namespace kiln::kernels {

/// Tile sizes (rows of queries, rows of keys per block product).
struct FlashBlocks {
  int64_t queries = 64;
  int64_t keys = 128;
};

/// q [b, h, s, d], k/v [b, hkv, s, d] -> (out [b, h, s, d], lse [b, h, s]),
/// lse the natural log-sum-exp of each row of scaled, masked scores.
std::pair<Tensor, Tensor> flashAttention(const Tensor &q, const Tensor &k, const Tensor &v,
                                         bool causal, float scale, FlashBlocks blocks = {});

/// VJP of flashAttention: (dq, dk, dv) from dout [b, h, s, d] and the
/// forward's inputs, out and lse. Probabilities are recomputed per block from
/// lse; dk/dv sum over the query heads of a GQA group.
std::tuple<Tensor, Tensor, Tensor>
flashAttentionBackward(const Tensor &dout, const Tensor &q, const Tensor &k, const Tensor &v,
                       const Tensor &out, const Tensor &lse, bool causal, float scale,
                       FlashBlocks blocks = {});

} // namespace kiln::kernels

#endif // KILN_RUNTIME_FLASHATTENTION_H
