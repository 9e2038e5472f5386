//===- Qwen3Naming.cpp - HF parameter keys <-> torchtitan module paths ----===//

#include "kiln/Frontend/Qwen3Naming.h"

#include <regex>

namespace kiln {

namespace {
/// Per-layer modules: HF path under "model.layers.N." -> torchtitan path under
/// "layers.N.", in Hugging Face checkpoint order.
struct LayerModule {
  const char *hf, *torchtitan;
};
constexpr LayerModule kLayerModules[] = {
    {"input_layernorm", "attention_norm"},
    {"self_attn.q_proj", "attention.wq"},
    {"self_attn.k_proj", "attention.wk"},
    {"self_attn.v_proj", "attention.wv"},
    {"self_attn.o_proj", "attention.wo"},
    {"self_attn.q_norm", "attention.q_norm"},
    {"self_attn.k_norm", "attention.k_norm"},
    {"post_attention_layernorm", "ffn_norm"},
    {"mlp.gate_proj", "feed_forward.w1"},
    {"mlp.up_proj", "feed_forward.w3"},
    {"mlp.down_proj", "feed_forward.w2"},
};
/// A sparse layer's MoE modules replace the dense MLP's three. The experts'
/// weights are stacked along a first dimension of num_experts; their keys
/// hold "*" where HF's per-expert keys hold the expert index.
constexpr LayerModule kMoeModules[] = {
    {"mlp.gate", "moe.router.gate"},
    {"mlp.experts.*.gate_proj", "moe.experts.w1"},
    {"mlp.experts.*.up_proj", "moe.experts.w3"},
    {"mlp.experts.*.down_proj", "moe.experts.w2"},
};
constexpr LayerModule kTopModules[] = {
    {"model.embed_tokens", "tok_embeddings"},
    {"model.norm", "norm"},
    {"lm_head", "output"},
};
} // namespace

namespace {
/// Qwen3's RMSNorm of queries and keys, which Llama does not have.
bool isQkNorm(const LayerModule &module) {
  return std::string(module.torchtitan) == "attention.q_norm" ||
         std::string(module.torchtitan) == "attention.k_norm";
}
} // namespace

std::vector<Qwen3Parameter> qwen3Parameters(const Qwen3Config &c) {
  const int64_t d = c.hiddenSize, q = c.numHeads * c.headDim,
                kv = c.numKvHeads * c.headDim, ffn = c.intermediateSize,
                e = c.numExperts, moe = c.moeIntermediateSize;
  // Shapes in the order of kLayerModules ([out, in] for linears), then kMoeModules.
  const std::vector<int64_t> layerShapes[] = {
      {d}, {q, d}, {kv, d}, {kv, d}, {d, q}, {c.headDim}, {c.headDim},
      {d}, {ffn, d}, {ffn, d}, {d, ffn}};
  const std::vector<int64_t> moeShapes[] = {{e, d}, {e, moe, d}, {e, moe, d}, {e, d, moe}};
  constexpr size_t kDenseMlp = 3; // the last three of kLayerModules
  std::vector<Qwen3Parameter> params;
  params.push_back({"model.embed_tokens.weight", "tok_embeddings", {c.vocabSize, d}});
  for (int64_t layer = 0; layer < c.numLayers; ++layer) {
    std::string n = std::to_string(layer);
    auto add = [&](const LayerModule &module, const std::vector<int64_t> &shape) {
      params.push_back({"model.layers." + n + "." + module.hf + ".weight",
                        "layers." + n + "." + module.torchtitan, shape});
    };
    bool sparse = c.isSparseLayer(layer);
    size_t kept = std::size(kLayerModules) - (sparse ? kDenseMlp : 0);
    for (size_t i = 0; i < kept; ++i)
      if (c.hasQkNorm() || !isQkNorm(kLayerModules[i]))
        add(kLayerModules[i], layerShapes[i]);
    if (sparse)
      for (size_t i = 0; i < std::size(kMoeModules); ++i)
        add(kMoeModules[i], moeShapes[i]);
  }
  params.push_back({"model.norm.weight", "norm", {d}});
  if (!c.tieWordEmbeddings)
    params.push_back({"lm_head.weight", "output", {c.vocabSize, d}});
  return params;
}

std::string torchtitanModuleForHfKey(const std::string &hfKey) {
  static const std::regex layerKey(R"(model\.layers\.(\d+)\.(.+)\.weight)");
  static const std::regex expertKey(R"(mlp\.experts\.(\d+|\*)\.(.+))");
  std::smatch m;
  if (std::regex_match(hfKey, m, layerKey)) {
    std::string path = m[2].str();
    std::smatch e;
    if (std::regex_match(path, e, expertKey)) // one expert's slice of the stack
      path = "mlp.experts.*." + e[2].str();
    for (const LayerModule &module : kLayerModules)
      if (path == module.hf)
        return "layers." + m[1].str() + "." + module.torchtitan;
    for (const LayerModule &module : kMoeModules)
      if (path == module.hf)
        return "layers." + m[1].str() + "." + module.torchtitan;
    return "";
  }
  for (const LayerModule &module : kTopModules)
    if (hfKey == std::string(module.hf) + ".weight")
      return module.torchtitan;
  return "";
}

std::vector<std::string> qwen3TensorParallelPlan(const Qwen3Config &c) {
  // The vocabulary-parallel embedding and the loss-parallel output
  // (a tied output reads the embedding's table, split alike).
  std::vector<std::string> plan = {"tok_embeddings=rowwise"};
  if (!c.tieWordEmbeddings)
    plan.push_back("output=colwise");
  plan.insert(plan.end(), {"layers.*.attention.wq=colwise", "layers.*.attention.wk=colwise",
                           "layers.*.attention.wv=colwise", "layers.*.attention.wo=rowwise"});
  // kiln-shard refuses entries that match nothing: name only the MLPs the
  // model has.
  if (c.numSparseLayers() < c.numLayers)
    plan.insert(plan.end(), {"layers.*.feed_forward.w1=colwise",
                             "layers.*.feed_forward.w3=colwise",
                             "layers.*.feed_forward.w2=rowwise"});
  // Within each expert as in the dense MLP; the router stays replicated.
  if (c.numSparseLayers() > 0)
    plan.insert(plan.end(), {"layers.*.moe.experts.w1=colwise",
                             "layers.*.moe.experts.w3=colwise",
                             "layers.*.moe.experts.w2=rowwise"});
  return plan;
}

} // namespace kiln
