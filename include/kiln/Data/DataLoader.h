//===- DataLoader.h - Packed, shuffled token windows ------------*- C++ -*-===//
//
// Tokenizes documents, appends <|endoftext|> after each, concatenates them
// into one stream and cuts it into windows of seq_len + 1 tokens (inputs are
// window[:-1], labels window[1:]). A validation fraction of the windows is
// held out; the training windows are shuffled deterministically by seed and
// split across data-parallel ranks (rank r of R takes windows r, r+R, ...).
// The tokenized stream is cached on disk keyed by the documents' content
// hash and the tokenizer's hash.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_DATA_DATALOADER_H
#define KILN_DATA_DATALOADER_H

#include "kiln/Data/Tokenizer.h"
#include "kiln/Runtime/Tensor.h"

#include <cstdint>
#include <string>
#include <vector>

namespace kiln {

struct DataLoaderOptions {
  int64_t seqLen = 2048;
  int64_t batchSize = 8;
  uint64_t seed = 0;
  double validationFraction = 0.0; ///< in [0, 1): share of windows held out
  int64_t rank = 0, worldSize = 1;
  std::string cacheDir;            ///< "" disables the token cache
};

class DataLoader {
public:
  /// Tokenizes (or loads from the cache) and packs `documents`. Throws
  /// kiln::Error if there are too few tokens for one training batch per rank.
  DataLoader(const std::vector<std::string> &documents, const Tokenizer &tokenizer,
             const DataLoaderOptions &options);

  /// Training batch `index` (wrapping around the epoch, reshuffled with a new
  /// seed each epoch): I64 [batch, seq_len + 1]. A pure function of the
  /// index, the seed and the token stream: the loader's whole position is
  /// the index of the next batch, so a resumed run continues from there.
  Tensor trainBatch(int64_t index) const;
  /// Batches in one epoch; batch `index` is batch index % this of epoch
  /// index / this.
  int64_t batchesPerEpoch() const;
  /// A hash of the token stream, to check a resumed run reads the same data.
  std::string fingerprint() const;
  /// Every held-out window, in batches of at most batchSize rows.
  std::vector<Tensor> validationBatches() const;

  int64_t totalTokens() const;           ///< tokens in the stream, EOS included
  int64_t trainWindowsPerRank() const;   ///< windows this rank sees per epoch
  int64_t validationWindows() const;
  bool loadedFromCache() const;          ///< whether tokenization was skipped

private:
  DataLoaderOptions options_;
  std::vector<int32_t> stream_;
  std::vector<int64_t> trainWindows_, validationWindows_; ///< window start offsets
  bool fromCache_ = false;
};

} // namespace kiln

#endif // KILN_DATA_DATALOADER_H
