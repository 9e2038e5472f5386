//===- HfConfigFields.h - config.json fields v4 and v5 write apart -*- C++ -*-===//
//
// Transformers v4 and v5 write some config.json fields differently; Kiln
// reads both. v4: top-level `rope_theta` and `rope_scaling`, `torch_dtype`.
// v5 (configuration_utils.py, modeling_rope_utils.py): RoPE in
// `rope_parameters` ({"rope_type", "rope_theta", scaling fields}, or one such
// dict per layer type), `dtype`, and `layer_types` naming each layer's
// attention. A setting stated in both forms must agree.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_LIB_FRONTEND_HFCONFIGFIELDS_H
#define KILN_LIB_FRONTEND_HFCONFIGFIELDS_H

#include "kiln/Support/Json.h"
#include "kiln/Support/RopeFrequencies.h"

namespace kiln {

struct RopeParameters {
  double theta = 0;
  /// Set (factor > 0) only for rope_type "llama3", which only Llama takes.
  Llama3RopeScaling scaling;
};

/// The RoPE settings from `rope_theta` / `rope_scaling` (v4) and
/// `rope_parameters` (v5). Qwen3 takes rope_type "default" alone; Llama also
/// "llama3". Throws kiln::Error naming the field.
RopeParameters readRopeParameters(const JsonObject &config, bool llama);

/// `layer_types`, when given: one entry per layer, each "full_attention"
/// (sliding windows are refused by name, as `use_sliding_window` is).
void checkLayerTypes(const JsonObject &config, int64_t numLayers);

/// `torch_dtype` (v4) and `dtype` (v5), when both are given, must agree.
void checkDtypeFields(const JsonObject &config);

} // namespace kiln

#endif // KILN_LIB_FRONTEND_HFCONFIGFIELDS_H
