//===- BatchSource.cpp - Where a training run's batches come from ---------===//

#include "kiln/Driver/BatchSource.h"
#include "kiln/Data/Corpus.h"
#include "kiln/Runtime/TokenBatch.h"
#include "kiln/Support/Error.h"
#include "kiln/Support/Fnv128.h"
#include "kiln/Support/Json.h"
#include "kiln/Support/Paths.h"

#include <fmt/core.h>

#include <chrono>
#include <filesystem>

namespace kiln {

namespace {

/// Writes batches as one token file (`kiln eval`'s input format).
void writeTokenFile(const std::string &path, const std::vector<Tensor> &batches) {
  nlohmann::json rows = nlohmann::json::array();
  for (const Tensor &batch : batches)
    for (int64_t r = 0; r < batch.dim(0); ++r) {
      const int64_t *row = batch.data<int64_t>() + r * batch.dim(1);
      rows.push_back(std::vector<int64_t>(row, row + batch.dim(1)));
    }
  writeFileAtomic(path, rows.dump() + "\n");
}

} // namespace

BatchSource::BatchSource(const TrainConfig &c, int64_t batchRows, bool leader,
                         const std::function<void()> &barrier)
    : source_(c.data.source) {
  if (c.data.source == "tokens") {
    if (c.data.tokensFile.empty())
      fail("data: source 'tokens' needs data.tokens_file");
    fixed_ = readTokenBatch(c.data.tokensFile);
    return;
  }
  std::string cache = assetCacheDir();
  std::string path = c.data.path;
  if (path.empty() && c.data.source == "brown")
    path = cache + "/brown";
  if (path.empty())
    fail("data: source '{}' needs data.path", c.data.source);
  if (!std::filesystem::exists(path))
    fail("data.path: {} does not exist{}", path,
         c.data.source == "brown" ? " (run scripts/fetch-assets.sh)" : "");
  std::string tokenizerPath =
      c.data.tokenizer.empty() ? cache + "/qwen3/tokenizer.json" : c.data.tokenizer;
  if (!std::filesystem::exists(tokenizerPath))
    fail("data.tokenizer: {} does not exist (run scripts/fetch-assets.sh)", tokenizerPath);
  tokenizer_ = Tokenizer::load(tokenizerPath);
  DataLoaderOptions o;
  o.seqLen = c.training.seqLen;
  o.batchSize = batchRows;
  o.seed = uint64_t(c.data.seed);
  o.validationFraction = c.data.validationFraction;
  o.cacheDir = c.data.cacheDir.empty() ? cache + "/tokens" : c.data.cacheDir;
  auto start = std::chrono::steady_clock::now();
  std::vector<std::string> documents = readCorpus(c.data.source, path);
  bool shareCache = !o.cacheDir.empty();
  if (shareCache && !leader)
    barrier(); // the leader has written the cache
  loader_.emplace(documents, *tokenizer_, o);
  if (shareCache && leader)
    barrier();
  std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
  for (Tensor &batch : loader_->validationBatches())
    if (batch.dim(0) == batchRows) // the captured batch size
      validation_.push_back(std::move(batch));
  if (leader && !c.data.saveValidationTokens.empty() && !validation_.empty())
    writeTokenFile(c.data.saveValidationTokens, validation_);
  fmt::print("data: {} documents from {} ({}), {} tokens{}, {} training windows, {} "
             "held out ({} full validation batches), {:.1f} s\n",
             documents.size(), path, c.data.source, loader_->totalTokens(),
             loader_->loadedFromCache() ? " (cached)" : "", loader_->trainWindowsPerRank(),
             loader_->validationWindows(), validation_.size(), took.count());
}

nlohmann::json BatchSource::position(int64_t nextBatch) const {
  if (fingerprint_.empty()) {
    if (loader_) {
      fingerprint_ = loader_->fingerprint();
    } else {
      Fnv128 h;
      h.bytes(fixed_.rawData(), fixed_.nbytes());
      fingerprint_ = h.hex();
    }
  }
  nlohmann::json out = {{"source", source_}, {"next_batch", nextBatch},
                        {"fingerprint", fingerprint_}};
  if (loader_) {
    int64_t perEpoch = loader_->batchesPerEpoch();
    out["batches_per_epoch"] = perEpoch;
    out["epoch"] = nextBatch / perEpoch;
    out["batch_in_epoch"] = nextBatch % perEpoch;
  }
  return out;
}

void BatchSource::checkPosition(const nlohmann::json &saved, const std::string &source) const {
  JsonObject s(saved, source);
  nlohmann::json now = position(s.getInt("next_batch"));
  if (s.getString("source") != source_)
    fail("{}: the checkpoint's run read data.source '{}', this run '{}'", source,
         s.getString("source"), source_);
  if (s.getString("fingerprint") != now["fingerprint"])
    fail("{}: the checkpoint's run read other training data (fingerprint {}, now {}): "
         "{} changed, or the files did",
         source, s.getString("fingerprint"), now["fingerprint"].get<std::string>(),
         loader_ ? "data.path or data.tokenizer" : "data.tokens_file");
  if (loader_ && s.getInt("batches_per_epoch") != now["batches_per_epoch"])
    fail("{}: the checkpoint's run had {} batches per epoch, this run {}: the batch, "
         "data.seq_len or data.validation_fraction changed",
         source, s.getInt("batches_per_epoch"), now["batches_per_epoch"].get<int64_t>());
}

} // namespace kiln
