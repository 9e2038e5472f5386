//===- BatchSource.h - Where a training run's batches come from -*- C++ -*-===//
//
// The training and held-out batches of `kiln train`: the fixed global batch
// of data.tokens_file every step, or a corpus (text, jsonl, brown) tokenized,
// packed and shuffled by the DataLoader. Batch k of a run is a pure function
// of k, the data and data.seed, so the data's position in a resumable
// checkpoint is the next batch's index with what checks the data is the same.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_DRIVER_BATCHSOURCE_H
#define KILN_DRIVER_BATCHSOURCE_H

#include "kiln/Data/DataLoader.h"
#include "kiln/Data/Tokenizer.h"
#include "kiln/Driver/TrainConfig.h"
#include "kiln/Runtime/Tensor.h"

#include <nlohmann/json.hpp>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace kiln {

class BatchSource {
public:
  /// `batchRows`: the global batch (every data-parallel rank's rows).
  /// `barrier` synchronises every rank: with a token cache, the leader
  /// tokenizes the corpus and writes the cache while the others wait, then
  /// they load it instead of each tokenizing it again.
  BatchSource(const TrainConfig &c, int64_t batchRows, bool leader,
              const std::function<void()> &barrier);

  /// Training batch `index` (0-based: step s trains on batch s - 1).
  Tensor train(int64_t index) const { return loader_ ? loader_->trainBatch(index) : fixed_; }
  const std::vector<Tensor> &validation() const { return validation_; }

  /// The data's position before training batch `nextBatch`, as a resumable
  /// checkpoint records it: the index, where it falls in the shuffled
  /// epochs, and a fingerprint of the data.
  nlohmann::json position(int64_t nextBatch) const;
  /// Throws kiln::Error naming `source` (the checkpoint's file) and the field
  /// unless `saved`, a position() of the checkpoint's run, continues on this
  /// data: the same source, tokens and epoch length.
  void checkPosition(const nlohmann::json &saved, const std::string &source) const;

private:
  std::string source_;
  Tensor fixed_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::optional<DataLoader> loader_;
  std::vector<Tensor> validation_;
  mutable std::string fingerprint_; ///< computed at the first position()
};

} // namespace kiln

#endif // KILN_DRIVER_BATCHSOURCE_H
