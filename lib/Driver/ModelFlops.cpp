//===- ModelFlops.cpp - Model FLOPs per token, by published definitions ---===//

#include "kiln/Driver/ModelFlops.h"

namespace kiln {

namespace {
double torchtitanCount(const Qwen3Config &m, int64_t headDim, int64_t seqLen) {
  return 6.0 * double(m.activeMatmulParameterCount()) +
         12.0 * double(m.numLayers) * double(m.numHeads) * double(headDim) * double(seqLen);
}
} // namespace

double torchtitanFlopsPerToken(const Qwen3Config &m, int64_t seqLen) {
  return torchtitanCount(m, m.headDim, seqLen);
}

double torchtitanBefore1923FlopsPerToken(const Qwen3Config &m, int64_t seqLen) {
  return torchtitanCount(m, m.hiddenSize / m.numHeads, seqLen);
}

double nxdtFlopsPerToken(const Qwen3Config &m, int64_t seqLen) {
  if (m.isMoe())
    return 0;
  double h = double(m.hiddenSize), t = double(seqLen), heads = double(m.numHeads);
  // The script's head size is hidden / heads (integer), as a Llama config has.
  double headSize = double(m.hiddenSize / m.numHeads);
  double kv = double(m.numKvHeads) * headSize * h;
  double attention = 2 * h * h * t + 2 * 2 * kv * t + 2 * t * t * h + 6 * heads * t * t +
                     2 * t * t * h + 2 * h * h * t;
  double mlp = 3 * 2 * double(m.intermediateSize) * h * t;
  double embeddings = 2 * 2 * double(m.vocabSize) * h * t;
  double forward = double(m.numLayers) * (attention + mlp) + embeddings;
  return 3 * forward / t;
}

} // namespace kiln
