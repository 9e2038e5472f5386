//===- Qwen3Config.h - Qwen3 model hyper-parameters -------------*- C++ -*-===//
//
// The shape of a dense Qwen3 model, read from a Hugging Face config.json or
// taken from a built-in flavor with the published shapes.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_FRONTEND_QWEN3CONFIG_H
#define KILN_FRONTEND_QWEN3CONFIG_H

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

  /// Parameters, with tied embeddings counted once.
  int64_t parameterCount() const;
  /// Parameters that take part in matmuls (everything but norms and the
  /// input embedding unless it doubles as the output projection).
  int64_t matmulParameterCount() const;

  /// A Hugging Face config.json for this model (float32 weights).
  std::string toHfConfigJson() const;

  /// Throws kiln::Error naming `source` if the values are inconsistent.
  void validate(const std::string &source) const;

  /// Reads `<dir>/config.json`; throws kiln::Error naming the file and field.
  static Qwen3Config fromHfDirectory(const std::string &dir);
  /// Parses config.json text; `source` names it in errors.
  static Qwen3Config fromHfJson(const std::string &text, const std::string &source);
  /// The built-in flavors (qwen3-0.6b ... qwen3-32b).
  static const std::vector<Qwen3Config> &flavors();
  /// A directory holding config.json, or a flavor name.
  static Qwen3Config resolve(const std::string &model);
};

} // namespace kiln

#endif // KILN_FRONTEND_QWEN3CONFIG_H
