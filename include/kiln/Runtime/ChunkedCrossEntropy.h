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

/// Rows per chunk when chunkRows is left at 0. The chunk's three GEMMs each
/// stream the whole [V, H] weight or its gradient, and their rate falls with
/// the rows: OpenBLAS ran them at 55 to 70 GFLOP/s with 27 rows and 144 to
/// 173 with 256 (Qwen3's vocabulary, H 128 and 1024, on a machine whose
/// 2048^3 sgemm ran at 190). 256 rows of that vocabulary's logits are
/// 155.6 MB; chunk_rows trades speed back for memory.
constexpr int64_t kDefaultChunkRows = 256;

/// The rows each chunk takes for `rows` rows: chunkRows, or
/// kDefaultChunkRows when it is <= 0, at most `rows` and at least 1.
int64_t resolveChunkRows(int64_t rows, int64_t chunkRows);

struct ChunkedCrossEntropyResult {
  Tensor loss;  ///< f32 scalar: sum of row losses / (totalPositions or rows)
  Tensor gradH; ///< d loss / d h, [..., H]
  Tensor gradW; ///< d loss / d weight, [V, H]
};

/// h [..., H], weight [V, H] (HF [out, in]), labels [...] (I64 or I32; an id
/// outside [0, V) throws kiln::Error). The mean divides by totalPositions
/// when given (a rank's share of a batch split across ranks), else by the
/// number of rows. chunkRows <= 0 picks kDefaultChunkRows.
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
