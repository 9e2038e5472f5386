//===- Qwen3Config.cpp - Qwen3 model hyper-parameters ---------------------===//

#include "kiln/Frontend/Qwen3Config.h"
#include "HfConfigFields.h"
#include "kiln/Support/Error.h"
#include "kiln/Support/Json.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

namespace kiln {

bool Qwen3Config::isSparseLayer(int64_t layer) const {
  return isMoe() &&
         std::find(mlpOnlyLayers.begin(), mlpOnlyLayers.end(), layer) == mlpOnlyLayers.end() &&
         (layer + 1) % decoderSparseStep == 0;
}

int64_t Qwen3Config::numSparseLayers() const {
  int64_t n = 0;
  for (int64_t layer = 0; layer < numLayers; ++layer)
    n += isSparseLayer(layer);
  return n;
}

namespace {
/// Matmul parameters of the layers with `experts` experts counted per
/// sparse layer (all of them, or the k a token reaches).
int64_t matmulParameters(const Qwen3Config &c, int64_t experts) {
  int64_t qDim = c.numHeads * c.headDim, kvDim = c.numKvHeads * c.headDim;
  int64_t attention = c.hiddenSize * (2 * qDim + 2 * kvDim);
  int64_t dense = 3 * c.hiddenSize * c.intermediateSize;
  int64_t sparse = c.numExperts * c.hiddenSize + // the router's gate
                   experts * 3 * c.hiddenSize * c.moeIntermediateSize;
  int64_t sparseLayers = c.numSparseLayers();
  // The output projection is a matmul whether or not it shares the
  // embedding's storage; the input embedding is a gather.
  return c.numLayers * attention + (c.numLayers - sparseLayers) * dense +
         sparseLayers * sparse + c.vocabSize * c.hiddenSize;
}

int64_t otherParameters(const Qwen3Config &c) {
  int64_t qkNorms = c.hasQkNorm() ? 2 * c.headDim : 0;
  int64_t norms = c.numLayers * (2 * c.hiddenSize + qkNorms) + c.hiddenSize;
  int64_t embedding = c.tieWordEmbeddings ? 0 : c.vocabSize * c.hiddenSize;
  return norms + embedding;
}
} // namespace

int64_t Qwen3Config::matmulParameterCount() const { return matmulParameters(*this, numExperts); }

int64_t Qwen3Config::activeMatmulParameterCount() const {
  return matmulParameters(*this, numExpertsPerTok);
}

int64_t Qwen3Config::parameterCount() const {
  return matmulParameterCount() + otherParameters(*this);
}

int64_t Qwen3Config::activeParameterCount() const {
  return activeMatmulParameterCount() + otherParameters(*this);
}

void Qwen3Config::checkSizes(const std::string &source) const {
  // Each layer is a few dozen ops of IR: far past any published model, a
  // layer count only builds IR until memory runs out.
  if (numLayers > kMaxLayers)
    fail("{}: 'num_hidden_layers' is {}; Kiln captures at most {} layers (the largest "
         "Qwen3 has 94)",
         source, numLayers, kMaxLayers);
  // Every later count (elements, bytes) is a product of these: work
  // them out in 128 bits so no size can wrap around int64 unnoticed.
  using Wide = __int128;
  auto check = [&](const char *what, Wide value) {
    if (value > kMaxElements)
      fail("{}: {} come to {:.3g} elements, beyond the {:.3g} Kiln can address (check "
           "the sizes in the config)",
           source, what, double(value), double(kMaxElements));
  };
  Wide d = hiddenSize, v = vocabSize, hd = headDim;
  check("vocab_size x hidden_size", v * d);
  check("num_attention_heads x head_dim x hidden_size", Wide(numHeads) * hd * d);
  check("num_key_value_heads x head_dim x hidden_size", Wide(numKvHeads) * hd * d);
  check("intermediate_size x hidden_size", Wide(intermediateSize) * d);
  check("max_position_embeddings x head_dim", Wide(maxPositionEmbeddings) * hd);
  if (isMoe())
    check("num_experts x moe_intermediate_size x hidden_size",
          Wide(numExperts) * moeIntermediateSize * d);
  Wide perLayer = Wide(numHeads + numKvHeads) * hd * d * 2 + Wide(intermediateSize) * d * 3 +
                  (isMoe() ? Wide(numExperts) * (Wide(moeIntermediateSize) * d * 3 + d) : 0);
  check("the parameters", perLayer * numLayers + 2 * v * d);
}

void Qwen3Config::validate(const std::string &source) const {
  auto positive = [&](const char *field, int64_t value) {
    if (value <= 0)
      fail("{}: '{}' must be a positive integer, got {}", source, field, value);
  };
  positive("hidden_size", hiddenSize);
  positive("num_hidden_layers", numLayers);
  positive("num_attention_heads", numHeads);
  positive("num_key_value_heads", numKvHeads);
  positive("head_dim", headDim);
  positive("intermediate_size", intermediateSize);
  positive("vocab_size", vocabSize);
  positive("max_position_embeddings", maxPositionEmbeddings);
  if (numHeads % numKvHeads)
    fail("{}: num_attention_heads ({}) must be divisible by num_key_value_heads ({})",
         source, numHeads, numKvHeads);
  if (headDim % 2)
    fail("{}: head_dim ({}) must be even for rotary embeddings", source, headDim);
  if (!(rmsNormEps > 0) || !std::isfinite(rmsNormEps))
    fail("{}: 'rms_norm_eps' must be a finite positive number, got {}", source, rmsNormEps);
  if (!(ropeTheta > 0) || !std::isfinite(ropeTheta))
    fail("{}: 'rope_theta' must be a finite positive number, got {}", source, ropeTheta);
  if (isMoe()) {
    positive("num_experts", numExperts);
    positive("num_experts_per_tok", numExpertsPerTok);
    positive("moe_intermediate_size", moeIntermediateSize);
    positive("decoder_sparse_step", decoderSparseStep);
  }
  checkSizes(source);
  if (!isMoe())
    return;
  if (numExpertsPerTok > numExperts)
    fail("{}: 'num_experts_per_tok' ({}) must not exceed 'num_experts' ({})", source,
         numExpertsPerTok, numExperts);
  for (int64_t layer : mlpOnlyLayers)
    if (layer < 0 || layer >= numLayers)
      fail("{}: 'mlp_only_layers' holds {}, not a layer index in [0, {})", source, layer,
           numLayers);
  if (!(routerAuxLossCoef >= 0) || !std::isfinite(routerAuxLossCoef))
    fail("{}: 'router_aux_loss_coef' must be a finite number >= 0, got {}", source,
         routerAuxLossCoef);
  if (!(loadBalanceCoeff >= 0) || !std::isfinite(loadBalanceCoeff))
    fail("{}: 'load_balance_coeff' must be a finite number >= 0, got {}", source,
         loadBalanceCoeff);
}

std::string Qwen3Config::toHfConfigJson() const {
  nlohmann::json ropeScalingJson = nullptr;
  if (hasRopeScaling())
    ropeScalingJson = {{"rope_type", "llama3"},
                       {"factor", ropeScaling.factor},
                       {"low_freq_factor", ropeScaling.lowFreqFactor},
                       {"high_freq_factor", ropeScaling.highFreqFactor},
                       {"original_max_position_embeddings", ropeScaling.originalMaxPositionEmbeddings}};
  nlohmann::json config = {
      {"architectures",
       {llama ? "LlamaForCausalLM" : isMoe() ? "Qwen3MoeForCausalLM" : "Qwen3ForCausalLM"}},
      {"model_type", llama ? "llama" : isMoe() ? "qwen3_moe" : "qwen3"},
      {"hidden_size", hiddenSize},
      {"num_hidden_layers", numLayers},
      {"num_attention_heads", numHeads},
      {"num_key_value_heads", numKvHeads},
      {"head_dim", headDim},
      {"intermediate_size", intermediateSize},
      {"vocab_size", vocabSize},
      {"rms_norm_eps", rmsNormEps},
      {"rope_theta", ropeTheta},
      {"tie_word_embeddings", tieWordEmbeddings},
      {"max_position_embeddings", maxPositionEmbeddings},
      {"hidden_act", "silu"},
      {"attention_bias", false},
      {"attention_dropout", 0.0},
      {"rope_scaling", ropeScalingJson},
      {"use_sliding_window", false},
      {"torch_dtype", "float32"},
  };
  if (llama)
    config["mlp_bias"] = false;
  if (isMoe()) {
    config["num_experts"] = numExperts;
    config["num_experts_per_tok"] = numExpertsPerTok;
    config["moe_intermediate_size"] = moeIntermediateSize;
    config["norm_topk_prob"] = normTopkProb;
    config["decoder_sparse_step"] = decoderSparseStep;
    config["mlp_only_layers"] = mlpOnlyLayers;
    config["router_aux_loss_coef"] = routerAuxLossCoef;
    config["output_router_logits"] = outputRouterLogits;
    if (loadBalanceCoeff > 0)
      config["load_balance_coeff"] = loadBalanceCoeff;
  }
  return config.dump(2) + "\n";
}

namespace {
/// config.json settings that change the model Kiln would build: refused by
/// name rather than silently giving the plain Qwen3's numbers.
void rejectUnsupported(const JsonObject &config) {
  const nlohmann::json &j = config.json();
  auto unsupported = [&](const char *field, const std::string &why) {
    fail("{}: '{}' = {} is not supported: {}", config.source(), field,
         briefJson(j.at(field)), why);
  };
  if (j.contains("attention_bias") && j["attention_bias"] != false)
    unsupported("attention_bias", "Kiln's attention projections have no bias (false)");
  if (j.contains("hidden_act") && j["hidden_act"] != "silu")
    unsupported("hidden_act", "Kiln's MLPs are SwiGLU (\"silu\")");
  if (j.contains("mlp_bias") && j["mlp_bias"] != false)
    unsupported("mlp_bias", "Kiln's MLP projections have no bias (false)");
  if (j.contains("pretraining_tp") && j["pretraining_tp"] != 1)
    unsupported("pretraining_tp", "Kiln computes each projection as one matmul (1)");
  if (j.contains("use_sliding_window") && j["use_sliding_window"] != false)
    unsupported("use_sliding_window", "Kiln's attention is full causal attention (false)");
  if (j.contains("attention_dropout") &&
      !(j["attention_dropout"].is_number() && j["attention_dropout"].get<double>() == 0))
    unsupported("attention_dropout", "Kiln trains without dropout (0.0)");
}
} // namespace

Qwen3Config Qwen3Config::fromHfJson(const std::string &text, const std::string &source) {
  JsonObject config = JsonObject::parse(text, source);
  std::string modelType = config.getString("model_type");
  if (modelType != "qwen3" && modelType != "qwen3_moe" && modelType != "llama")
    fail("{}: model_type '{}' is not supported (expected 'qwen3', 'qwen3_moe' or 'llama')",
         source, modelType);
  Qwen3Config c;
  c.llama = modelType == "llama";
  rejectUnsupported(config);
  c.name = source;
  c.hiddenSize = config.getInt("hidden_size");
  c.numLayers = config.getInt("num_hidden_layers");
  c.numHeads = config.getInt("num_attention_heads");
  c.numKvHeads = config.getInt("num_key_value_heads");
  // Llama configs may leave head_dim to hidden_size / num_attention_heads.
  if (c.llama && !config.has("head_dim")) {
    if (c.numHeads <= 0 || c.hiddenSize % c.numHeads)
      fail("{}: without 'head_dim', 'hidden_size' ({}) must be a multiple of "
           "'num_attention_heads' ({})",
           source, c.hiddenSize, c.numHeads);
    c.headDim = c.hiddenSize / c.numHeads;
  } else {
    c.headDim = config.getInt("head_dim");
  }
  c.intermediateSize = config.getInt("intermediate_size");
  c.vocabSize = config.getInt("vocab_size");
  c.rmsNormEps = config.getNumber("rms_norm_eps");
  RopeParameters rope = readRopeParameters(config, c.llama);
  c.ropeTheta = rope.theta;
  c.tieWordEmbeddings = config.getBool("tie_word_embeddings");
  c.maxPositionEmbeddings = config.getInt("max_position_embeddings");
  c.ropeScaling = rope.scaling;
  checkLayerTypes(config, c.numLayers);
  checkDtypeFields(config);
  if (modelType == "qwen3_moe") {
    c.numExperts = config.getInt("num_experts");
    c.numExpertsPerTok = config.getInt("num_experts_per_tok");
    c.moeIntermediateSize = config.getInt("moe_intermediate_size");
    c.normTopkProb = config.getBool("norm_topk_prob");
    c.decoderSparseStep = config.getInt("decoder_sparse_step");
    c.routerAuxLossCoef = config.getNumber("router_aux_loss_coef");
    // Optional in HF (PretrainedConfig defaults them).
    if (config.has("output_router_logits"))
      c.outputRouterLogits = config.getBool("output_router_logits");
    if (config.has("load_balance_coeff"))
      c.loadBalanceCoeff = config.getNumber("load_balance_coeff");
    if (config.has("mlp_only_layers")) {
      const nlohmann::json &layers = config.get("mlp_only_layers");
      if (!layers.is_array())
        fail("{}: 'mlp_only_layers' must be an array of layer indices", source);
      for (const nlohmann::json &layer : layers) {
        if (!layer.is_number_integer())
          fail("{}: 'mlp_only_layers' must hold integers, got {}", source, briefJson(layer));
        c.mlpOnlyLayers.push_back(layer.get<int64_t>());
      }
    }
    if (c.numExperts <= 0)
      fail("{}: 'num_experts' must be a positive integer, got {}", source, c.numExperts);
  }
  c.validate(source);
  return c;
}

const std::vector<std::string> &Qwen3Config::hfFieldNames() {
  static const std::vector<std::string> names = {
      "hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
      "head_dim", "intermediate_size", "vocab_size", "rms_norm_eps", "rope_theta",
      "tie_word_embeddings", "max_position_embeddings", "num_experts", "num_experts_per_tok",
      "moe_intermediate_size", "norm_topk_prob", "decoder_sparse_step", "mlp_only_layers",
      "router_aux_loss_coef", "output_router_logits", "load_balance_coeff"};
  return names;
}

Qwen3Config Qwen3Config::withOverrides(const nlohmann::json &fields,
                                       const std::string &source) const {
  if (fields.empty())
    return *this;
  const std::vector<std::string> &known = hfFieldNames();
  nlohmann::json config = nlohmann::json::parse(toHfConfigJson());
  for (const auto &[key, value] : fields.items()) {
    if (std::find(known.begin(), known.end(), key) == known.end()) {
      std::string list;
      for (const std::string &k : known)
        list += (list.empty() ? "" : ", ") + k;
      fail("{}: 'model.{}' is not a model field Kiln can override (known: {})", source, key,
           list);
    }
    if (!isMoe() && (key.find("expert") != std::string::npos || key == "load_balance_coeff"))
      fail("{}: 'model.{}' applies to Qwen3-MoE models only; {} is dense", source, key, name);
    config[key] = value;
  }
  Qwen3Config out = fromHfJson(config.dump(), source + " (model." + fields.begin().key() +
                                                  (fields.size() > 1 ? ", ..." : "") + ")");
  out.name = name;
  return out;
}

Qwen3Config Qwen3Config::fromHfDirectory(const std::string &dir) {
  std::string path = (std::filesystem::path(dir) / "config.json").string();
  Qwen3Config config = fromHfJson(readFile(path), path);
  config.name = dir;
  return config;
}

const std::vector<Qwen3Config> &Qwen3Config::flavors() {
  // Published Qwen3 shapes; all share vocab 151936, head_dim 128, qk-norm,
  // RMSNorm eps 1e-6, rope theta 1e6 and 40960 positions. The MoE models
  // have every layer sparse and norm_topk_prob set.
  static const std::vector<Qwen3Config> all = [] {
    struct Row {
      const char *name;
      int64_t hidden, layers, heads, kvHeads, intermediate;
      bool tied;
      int64_t experts = 0, topK = 0, moeIntermediate = 0;
    };
    const Row rows[] = {
        {"qwen3-0.6b", 1024, 28, 16, 8, 3072, true},
        {"qwen3-1.7b", 2048, 28, 16, 8, 6144, true},
        {"qwen3-4b", 2560, 36, 32, 8, 9728, true},
        {"qwen3-8b", 4096, 36, 32, 8, 12288, false},
        {"qwen3-14b", 5120, 40, 40, 8, 17408, false},
        {"qwen3-32b", 5120, 64, 64, 8, 25600, false},
        {"qwen3-30b-a3b", 2048, 48, 32, 4, 6144, false, 128, 8, 768},
        {"qwen3-235b-a22b", 4096, 94, 64, 4, 12288, false, 128, 8, 1536},
    };
    std::vector<Qwen3Config> out;
    // Llama 3.1 (Meta's published configs): vocab 128256, head_dim 128, 8 KV
    // heads, RMSNorm eps 1e-5, rope theta 5e5 with llama3 scaling (factor 8,
    // low 1, high 4, 8192 original positions), 131072 positions, untied.
    struct LlamaRow {
      const char *name;
      int64_t hidden, layers, heads, intermediate;
    };
    const LlamaRow llamaRows[] = {
        {"llama3.1-8b", 4096, 32, 32, 14336},
        {"llama3.1-70b", 8192, 80, 64, 28672},
        {"llama3.1-405b", 16384, 126, 128, 53248},
    };
    auto addLlama = [&](const LlamaRow &r) {
      Qwen3Config c;
      c.name = r.name;
      c.llama = true;
      c.hiddenSize = r.hidden;
      c.numLayers = r.layers;
      c.numHeads = r.heads;
      c.numKvHeads = 8;
      c.headDim = 128;
      c.intermediateSize = r.intermediate;
      c.vocabSize = 128256;
      c.rmsNormEps = 1e-5;
      c.ropeTheta = 500000;
      c.maxPositionEmbeddings = 131072;
      c.ropeScaling = {8, 1, 4, 8192};
      out.push_back(c);
    };
    for (const Row &r : rows) {
      Qwen3Config c;
      c.name = r.name;
      c.hiddenSize = r.hidden;
      c.numLayers = r.layers;
      c.numHeads = r.heads;
      c.numKvHeads = r.kvHeads;
      c.headDim = 128;
      c.intermediateSize = r.intermediate;
      c.vocabSize = 151936;
      c.tieWordEmbeddings = r.tied;
      c.maxPositionEmbeddings = 40960;
      c.numExperts = r.experts;
      c.numExpertsPerTok = r.topK;
      c.moeIntermediateSize = r.moeIntermediate;
      out.push_back(c);
    }
    for (const LlamaRow &r : llamaRows)
      addLlama(r);
    return out;
  }();
  return all;
}

const Qwen3Config &Qwen3Config::flavor(const std::string &name) {
  for (const Qwen3Config &flavor : flavors())
    if (flavor.name == name)
      return flavor;
  std::string names;
  for (const Qwen3Config &flavor : flavors())
    names += (names.empty() ? "" : ", ") + flavor.name;
  fail("--model '{}' is neither a directory with config.json nor a flavor ({})", name,
       names);
}

Qwen3Config Qwen3Config::resolve(const std::string &model) {
  if (std::filesystem::is_directory(model))
    return fromHfDirectory(model);
  return flavor(model);
}

} // namespace kiln
