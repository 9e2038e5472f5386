//===- Qwen3Config.cpp - Qwen3 model hyper-parameters ---------------------===//

#include "kiln/Frontend/Qwen3Config.h"
#include "kiln/Support/Error.h"
#include "kiln/Support/Json.h"

#include <filesystem>

namespace kiln {

int64_t Qwen3Config::matmulParameterCount() const {
  int64_t qDim = numHeads * headDim, kvDim = numKvHeads * headDim;
  int64_t attention = hiddenSize * (2 * qDim + 2 * kvDim);
  int64_t mlp = 3 * hiddenSize * intermediateSize;
  // The output projection is a matmul whether or not it shares the
  // embedding's storage; the input embedding is a gather.
  return numLayers * (attention + mlp) + vocabSize * hiddenSize;
}

int64_t Qwen3Config::parameterCount() const {
  int64_t norms = numLayers * (2 * hiddenSize + 2 * headDim) + hiddenSize;
  int64_t embedding = tieWordEmbeddings ? 0 : vocabSize * hiddenSize;
  return matmulParameterCount() + norms + embedding;
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
  if (!(rmsNormEps > 0))
    fail("{}: 'rms_norm_eps' must be positive, got {}", source, rmsNormEps);
  if (!(ropeTheta > 0))
    fail("{}: 'rope_theta' must be positive, got {}", source, ropeTheta);
}

std::string Qwen3Config::toHfConfigJson() const {
  nlohmann::json config = {
      {"architectures", {"Qwen3ForCausalLM"}},
      {"model_type", "qwen3"},
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
      {"rope_scaling", nullptr},
      {"use_sliding_window", false},
      {"torch_dtype", "float32"},
  };
  return config.dump(2) + "\n";
}

Qwen3Config Qwen3Config::fromHfJson(const std::string &text, const std::string &source) {
  JsonObject config = JsonObject::parse(text, source);
  std::string modelType = config.getString("model_type");
  if (modelType != "qwen3")
    fail("{}: model_type '{}' is not supported (expected 'qwen3')", source, modelType);
  Qwen3Config c;
  c.name = source;
  c.hiddenSize = config.getInt("hidden_size");
  c.numLayers = config.getInt("num_hidden_layers");
  c.numHeads = config.getInt("num_attention_heads");
  c.numKvHeads = config.getInt("num_key_value_heads");
  c.headDim = config.getInt("head_dim");
  c.intermediateSize = config.getInt("intermediate_size");
  c.vocabSize = config.getInt("vocab_size");
  c.rmsNormEps = config.getNumber("rms_norm_eps");
  c.ropeTheta = config.getNumber("rope_theta");
  c.tieWordEmbeddings = config.getBool("tie_word_embeddings");
  c.maxPositionEmbeddings = config.getInt("max_position_embeddings");
  c.validate(source);
  return c;
}

Qwen3Config Qwen3Config::fromHfDirectory(const std::string &dir) {
  std::string path = (std::filesystem::path(dir) / "config.json").string();
  Qwen3Config config = fromHfJson(readFile(path), path);
  config.name = dir;
  return config;
}

const std::vector<Qwen3Config> &Qwen3Config::flavors() {
  // Published Qwen3 dense shapes; all share vocab 151936, head_dim 128,
  // qk-norm, RMSNorm eps 1e-6, rope theta 1e6 and 40960 positions.
  static const std::vector<Qwen3Config> all = [] {
    struct Row {
      const char *name;
      int64_t hidden, layers, heads, kvHeads, intermediate;
      bool tied;
    };
    const Row rows[] = {
        {"qwen3-0.6b", 1024, 28, 16, 8, 3072, true},
        {"qwen3-1.7b", 2048, 28, 16, 8, 6144, true},
        {"qwen3-4b", 2560, 36, 32, 8, 9728, true},
        {"qwen3-8b", 4096, 36, 32, 8, 12288, false},
        {"qwen3-14b", 5120, 40, 40, 8, 17408, false},
        {"qwen3-32b", 5120, 64, 64, 8, 25600, false},
    };
    std::vector<Qwen3Config> out;
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
      out.push_back(c);
    }
    return out;
  }();
  return all;
}

Qwen3Config Qwen3Config::resolve(const std::string &model) {
  if (std::filesystem::is_directory(model))
    return fromHfDirectory(model);
  for (const Qwen3Config &flavor : flavors())
    if (flavor.name == model)
      return flavor;
  std::string names;
  for (const Qwen3Config &flavor : flavors())
    names += (names.empty() ? "" : ", ") + flavor.name;
  fail("--model '{}' is neither a directory with config.json nor a flavor ({})",
       model, names);
}

} // namespace kiln
