//===- ChunkedCrossEntropy.h - Fused output projection + loss ---*- C++ -*-===//
//
// crossEntropy(linear(h, weight), labels) without the [tokens, vocab] logits:
// rows are processed chunkRows at a time, and since the mean loss is the last
// op (its cotangent is a scalar), each chunk's gradients are formed in the
// same pass (the Liger-kernel "fused linear cross-entropy"). The backward then
// only scales them by dloss.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_RUNTIME_CHUNKEDCROSSENTROPY_H
#define KILN_RUNTIME_CHUNKEDCROSSENTROPY_H

#include "kiln/Runtime/Tensor.h"

#include <cstdint>
#include <optional>
#include <utility>

namespace kiln::kernels {

/// Bytes of logits one chunk may hold when chunkRows is left at 0.
constexpr int64_t kChunkLogitsBytes = int64_t(16) << 20;

/// The default chunk: as many rows as fit kChunkLogitsBytes (at least 1);
/// 27 rows (16.4 MB) for Qwen3's vocabulary of 151936.
int64_t defaultChunkRows(int64_t vocab);

/// The rows each chunk takes for `rows` rows: chunkRows, or the default when
/// it is <= 0, at most `rows` and at least 1.
int64_t resolveChunkRows(int64_t rows, int64_t vocab, int64_t chunkRows);

struct ChunkedCrossEntropyResult {
  Tensor loss;  ///< f32 scalar: sum of row losses / (totalPositions or rows)
  Tensor gradH; ///< d loss / d h, [..., H]
  Tensor gradW; ///< d loss / d weight, [V, H]
};

/// h [..., H], weight [V, H] (HF [out, in]), labels [...] (I64 or I32; an id
/// outside [0, V) throws kiln::Error). The mean divides by totalPositions
/// when given (a rank's share of a batch split across ranks), else by the
/// number of rows. chunkRows <= 0 picks defaultChunkRows(V).
ChunkedCrossEntropyResult chunkedCrossEntropy(const Tensor &h, const Tensor &weight,
                                              const Tensor &labels,
                                              std::optional<int64_t> totalPositions = {},
                                              int64_t chunkRows = 0);

/// (dh, dW) = dloss * (gradH, gradW), dloss an f32 scalar; writes into the
/// gradient buffers when they are uniquely owned.
std::pair<Tensor, Tensor> chunkedCrossEntropyBackward(const Tensor &dloss, Tensor gradH,
                                                      Tensor gradW);

/// Scratch the forward allocates besides its outputs (chunk logits and the
/// per-row losses), for the memory planner. chunkRows as in the forward.
int64_t chunkedCrossEntropyScratchBytes(int64_t rows, int64_t vocab, int64_t chunkRows = 0);

} // namespace kiln::kernels

#endif // KILN_RUNTIME_CHUNKEDCROSSENTROPY_H
