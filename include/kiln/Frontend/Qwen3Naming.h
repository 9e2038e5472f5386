//===- Qwen3Naming.h - HF parameter keys <-> torchtitan module paths -*- C++ -*-===//
//
// The one place that knows how Hugging Face Qwen3 parameter keys
// ("model.layers.3.self_attn.q_proj.weight") correspond to torchtitan module
// paths ("layers.3.attention.wq"). Ops carry the torchtitan path as `fqn` so
// override rules written for torchtitan match; parameters keep HF keys so
// checkpoints bind unchanged. docs/naming.md has the same table for people.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_FRONTEND_QWEN3NAMING_H
#define KILN_FRONTEND_QWEN3NAMING_H

#include "kiln/Frontend/Qwen3Config.h"

#include <cstdint>
#include <string>
#include <vector>

namespace kiln {

struct Qwen3Parameter {
  std::string hfKey;  ///< e.g. "model.layers.0.mlp.gate_proj.weight"
  std::string module; ///< torchtitan module path, e.g. "layers.0.feed_forward.w1"
  std::vector<int64_t> shape;
};

/// Every parameter of `config` in Hugging Face order. Tied models have no
/// "lm_head.weight": the output projection reuses "model.embed_tokens.weight".
std::vector<Qwen3Parameter> qwen3Parameters(const Qwen3Config &config);

/// The torchtitan module path of an HF key ("" if the key is not a Qwen3
/// parameter); e.g. "model.norm.weight" -> "norm".
std::string torchtitanModuleForHfKey(const std::string &hfKey);

/// torchtitan's tensor-parallel plan for Qwen3 as kiln-shard's `tp-plan`
/// (module glob = style): the token embedding rowwise (vocabulary parallel),
/// the output projection colwise (loss parallel; tied to the embedding, it
/// is split with it), attention q/k/v and the MLP's w1/w3 colwise, the
/// attention output and w2 rowwise, each expert of a MoE layer like a dense
/// MLP; everything else (the router and the norms) replicated over tp.
std::vector<std::string> qwen3TensorParallelPlan(const Qwen3Config &config);

} // namespace kiln

#endif // KILN_FRONTEND_QWEN3NAMING_H
