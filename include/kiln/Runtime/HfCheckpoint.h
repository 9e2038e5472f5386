//===- HfCheckpoint.h - Hugging Face model directories ----------*- C++ -*-===//
//
// Writing a model directory that transformers' from_pretrained() loads
// (config.json + model.safetensors, or 5-digit numbered shards plus
// model.safetensors.index.json), and comparing two checkpoints tensor by
// tensor.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_RUNTIME_HFCHECKPOINT_H
#define KILN_RUNTIME_HFCHECKPOINT_H

#include "kiln/Runtime/SafeTensors.h"

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace kiln {

/// A parameter key holding one '*' names a stack: the tensors whose keys put
/// 0, 1, ... in its place, stacked along a new first dimension. A MoE layer
/// keeps its experts' weights stacked ("model.layers.0.mlp.experts.*.
/// gate_proj.weight" [experts, inter, hidden]) while HF stores one tensor
/// per expert.
bool isStackedKey(const std::string &key);
/// The key of member `index` of a stacked key.
std::string stackMemberKey(const std::string &stackedKey, int64_t index);
/// `members` (equal shapes and dtypes) stacked along a new first dimension.
Tensor stackTensors(const std::vector<Tensor> &members);
/// Every stacked entry of `tensors` replaced by its members, as HF stores them.
TensorMap unstackTensors(const TensorMap &tensors);

/// Writes `dir` with config.json (`configJson` verbatim) and the tensors:
/// one model.safetensors if their bytes total <= `maxShardBytes`, else
/// model-0000i-of-0000N.safetensors shards filled greedily in name order
/// (a tensor larger than the limit gets a shard of its own) and the index.
/// The directory is built beside `dir` and swapped in by rename, so readers
/// see the old or the new checkpoint, never a mix. `writeMore`, if given, is
/// called with the temporary directory once the model files are in it, to
/// add files that must appear together with them. Throws kiln::Error naming
/// `dir`.
void saveHfCheckpoint(const std::string &dir, const std::string &configJson,
                      const TensorMap &tensors, int64_t maxShardBytes,
                      const std::function<void(const std::string &)> &writeMore = nullptr);

struct CheckpointDiff {
  std::vector<std::string> missing;    ///< in A, not in B (sorted)
  std::vector<std::string> unexpected; ///< in B, not in A (sorted)
  /// Common names whose shape or dtype differs, with a description.
  std::vector<std::pair<std::string, std::string>> mismatched;
  /// Common tensors of equal shape (dtype may differ), compared as F32. NaN
  /// where exactly one side holds a NaN at some position.
  std::map<std::string, double> maxAbsDiff;
};

/// Compares two checkpoints (anything Checkpoint::open accepts).
CheckpointDiff diffCheckpoints(const std::string &a, const std::string &b);

/// A deterministic human-readable report of `diff` between `a` and `b`.
std::string formatCheckpointDiff(const CheckpointDiff &diff, const std::string &a,
                                 const std::string &b);

} // namespace kiln

#endif // KILN_RUNTIME_HFCHECKPOINT_H
