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
constexpr LayerModule kTopModules[] = {
    {"model.embed_tokens", "tok_embeddings"},
    {"model.norm", "norm"},
    {"lm_head", "output"},
};
} // namespace

std::vector<Qwen3Parameter> qwen3Parameters(const Qwen3Config &c) {
  const int64_t d = c.hiddenSize, q = c.numHeads * c.headDim,
                kv = c.numKvHeads * c.headDim, ffn = c.intermediateSize;
  // Shapes in the order of kLayerModules ([out, in] for linears).
  const std::vector<int64_t> layerShapes[] = {
      {d}, {q, d}, {kv, d}, {kv, d}, {d, q}, {c.headDim}, {c.headDim},
      {d}, {ffn, d}, {ffn, d}, {d, ffn}};
  std::vector<Qwen3Parameter> params;
  params.push_back({"model.embed_tokens.weight", "tok_embeddings", {c.vocabSize, d}});
  for (int64_t layer = 0; layer < c.numLayers; ++layer)
    for (size_t i = 0; i < std::size(kLayerModules); ++i) {
      std::string n = std::to_string(layer);
      params.push_back({"model.layers." + n + "." + kLayerModules[i].hf + ".weight",
                        "layers." + n + "." + kLayerModules[i].torchtitan,
                        layerShapes[i]});
    }
  params.push_back({"model.norm.weight", "norm", {d}});
  if (!c.tieWordEmbeddings)
    params.push_back({"lm_head.weight", "output", {c.vocabSize, d}});
  return params;
}

std::string torchtitanModuleForHfKey(const std::string &hfKey) {
  static const std::regex layerKey(R"(model\.layers\.(\d+)\.(.+)\.weight)");
  std::smatch m;
  if (std::regex_match(hfKey, m, layerKey)) {
    for (const LayerModule &module : kLayerModules)
      if (m[2] == module.hf)
        return "layers." + m[1].str() + "." + module.torchtitan;
    return "";
  }
  for (const LayerModule &module : kTopModules)
    if (hfKey == std::string(module.hf) + ".weight")
      return module.torchtitan;
  return "";
}

std::vector<std::string> qwen3TensorParallelPlan() {
  return {"layers.*.attention.wq=colwise",    "layers.*.attention.wk=colwise",
          "layers.*.attention.wv=colwise",    "layers.*.attention.wo=rowwise",
          "layers.*.feed_forward.w1=colwise", "layers.*.feed_forward.w3=colwise",
          "layers.*.feed_forward.w2=rowwise"};
}

} // namespace kiln
