//===- Qwen3Config.h - Qwen3 model hyper-parameters -------------*- C++ -*-===//
//
// The shape of a Qwen3 model, dense (`model_type: "qwen3"`) or mixture of
// experts (`"qwen3_moe"`), read from a Hugging Face config.json or taken from
// a built-in flavor with the published shapes, optionally with fields
// overridden by their HF names.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_FRONTEND_QWEN3CONFIG_H
#define KILN_FRONTEND_QWEN3CONFIG_H

#include "kiln/Support/RopeFrequencies.h"

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace kiln {

struct Qwen3Config {
  std::string name; ///< flavor name or the directory it was read from
  int64_t hiddenSize = 0;
  int64_t numLayers = 0;
  int64_t numHeads = 0;
  int64_t numKvHeads = 0;
  int64_t headDim = 0;
  int64_t intermediateSize = 0;
  int64_t vocabSize = 0;
  double rmsNormEps = 1e-6;
  double ropeTheta = 1e6;
  bool tieWordEmbeddings = false;
  int64_t maxPositionEmbeddings = 0;
  /// Llama's architecture (`model_type: "llama"`): Qwen3's without the
  /// RMSNorm of queries and keys (qk-norm), optionally with Llama 3's RoPE
  /// scaling. Dense only.
  bool llama = false;
  /// `rope_scaling` of type "llama3"; factor 0: plain RoPE.
  Llama3RopeScaling ropeScaling;
  bool hasQkNorm() const { return !llama; }
  bool hasRopeScaling() const { return ropeScaling.factor > 0; }

  // Mixture of experts (Qwen3-MoE); numExperts == 0 is a dense model.
  int64_t numExperts = 0;
  int64_t numExpertsPerTok = 0;
  int64_t moeIntermediateSize = 0;
  bool normTopkProb = true;
  int64_t decoderSparseStep = 1;
  std::vector<int64_t> mlpOnlyLayers;
  double routerAuxLossCoef = 0.001;
  /// HF adds router_aux_loss_coef * load-balancing loss to the training loss.
  bool outputRouterLogits = false;
  /// torchtitan's aux-loss-free balancing (`load_balance_coeff`): the step of
  /// each router's expert bias; 0 turns it off. Not a Transformers field:
  /// written to config.json only when set.
  double loadBalanceCoeff = 0;

  bool isMoe() const { return numExperts > 0; }
  /// HF's rule: not in mlp_only_layers and (layer + 1) % decoder_sparse_step == 0.
  bool isSparseLayer(int64_t layer) const;
  int64_t numSparseLayers() const;

  /// Parameters, with tied embeddings counted once.
  int64_t parameterCount() const;
  /// Parameters that take part in matmuls (everything but norms and the
  /// input embedding unless it doubles as the output projection).
  int64_t matmulParameterCount() const;
  /// Parameters one token uses: all of a dense model, the k routed experts
  /// (not all of them) of a MoE layer.
  int64_t activeParameterCount() const;
  /// Matmul parameters one token uses (the FLOPs-per-token count).
  int64_t activeMatmulParameterCount() const;

  /// A Hugging Face config.json for this model (float32 weights).
  std::string toHfConfigJson() const;

  /// Throws kiln::Error naming `source` if the values are inconsistent or so
  /// large that element counts would overflow (checkSizes).
  void validate(const std::string &source) const;
  /// The most layers Kiln captures, and the largest element count of any
  /// tensor or of all parameters: 2^50, so bytes stay well inside int64
  /// (FLOP counts are doubles).
  static constexpr int64_t kMaxLayers = 4096;
  static constexpr int64_t kMaxElements = int64_t(1) << 50;

  /// Reads `<dir>/config.json`; throws kiln::Error naming the file and field.
  static Qwen3Config fromHfDirectory(const std::string &dir);
  /// Parses config.json text; `source` names it in errors.
  static Qwen3Config fromHfJson(const std::string &text, const std::string &source);
  /// This model with the config.json fields in `fields` (an object keyed by
  /// HF names, e.g. {"num_hidden_layers": 4}) replaced; unknown names and
  /// bad values are errors naming `source` and the field.
  Qwen3Config withOverrides(const nlohmann::json &fields, const std::string &source) const;
  /// The config.json field names withOverrides accepts.
  static const std::vector<std::string> &hfFieldNames();
  /// Part of validate(): the sizes and their products, in 128-bit arithmetic.
  void checkSizes(const std::string &source) const;

  /// The built-in flavors (qwen3-0.6b ... qwen3-32b, qwen3-30b-a3b,
  /// qwen3-235b-a22b; llama3-8b, llama3-70b, llama3-405b for comparing with
  /// published Llama 3.1 measurements).
  static const std::vector<Qwen3Config> &flavors();
  static const Qwen3Config &flavor(const std::string &name);
  /// A directory holding config.json, or a flavor name.
  static Qwen3Config resolve(const std::string &model);
};

} // namespace kiln

#endif // KILN_FRONTEND_QWEN3CONFIG_H
