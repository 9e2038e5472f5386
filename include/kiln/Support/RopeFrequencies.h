//===- RopeFrequencies.h - RoPE inverse frequencies ---------------*- C++ -*-===//
//
// The rotary embedding's inverse frequencies, plain (Qwen3) or with Llama 3's
// scaling, in one place for the CPU kernel, the dialect and the HLO lowering.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_SUPPORT_ROPEFREQUENCIES_H
#define KILN_SUPPORT_ROPEFREQUENCIES_H

#include <cmath>
#include <cstdint>
#include <vector>

namespace kiln {

/// Llama 3's RoPE scaling (Hugging Face `rope_scaling` with `rope_type`
/// "llama3"): wavelengths longer than original_max_position_embeddings /
/// low_freq_factor are stretched by `factor`, those shorter than
/// original_max_position_embeddings / high_freq_factor are kept, and the band
/// between is interpolated.
struct Llama3RopeScaling {
  double factor = 0, lowFreqFactor = 0, highFreqFactor = 0;
  int64_t originalMaxPositionEmbeddings = 0;
};

/// inv_freq[i] = theta^(-2i / head_dim) for i < head_dim / 2, in float32 as
/// Hugging Face computes them, then scaled by `scaling` when given. Inline:
/// the dialect (which links MLIR alone) and the runtime share it.
inline std::vector<float> ropeInverseFrequencies(double theta, int64_t headDim,
                                                 const Llama3RopeScaling *scaling = nullptr) {
  std::vector<float> invFreq(size_t(headDim / 2));
  for (int64_t i = 0; i < headDim / 2; ++i)
    invFreq[i] = 1.0f / std::pow(float(theta), float(2 * i) / float(headDim));
  if (!scaling)
    return invFreq;
  // Hugging Face's _compute_llama3_parameters, in float32 as torch runs it.
  const float pi = 3.14159265358979323846f;
  float original = float(scaling->originalMaxPositionEmbeddings);
  float factor = float(scaling->factor), low = float(scaling->lowFreqFactor),
        high = float(scaling->highFreqFactor);
  float lowFreqWavelen = original / low, highFreqWavelen = original / high;
  for (float &f : invFreq) {
    float wavelen = 2 * pi / f;
    if (wavelen > lowFreqWavelen) {
      f = f / factor; // low frequencies: stretched
    } else if (wavelen >= highFreqWavelen) {
      float smooth = (original / wavelen - low) / (high - low);
      f = (1 - smooth) * f / factor + smooth * f;
    } // high frequencies: kept
  }
  return invFreq;
}


} // namespace kiln

#endif // KILN_SUPPORT_ROPEFREQUENCIES_H
