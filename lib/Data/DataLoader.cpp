//===- DataLoader.cpp - Packed, shuffled token windows --------------------===//
//
// Layout of the token stream (N tokens, seq_len s):
//
//   window k = stream[k*s, k*s + s]   (s + 1 tokens, k = 0 .. (N-1)/s - 1)
//
// The stride is s, not s + 1: the last token of a window is the first input of
// the next, so every token except the very first is a label exactly once
// (torchtitan's packing likewise cuts seq_len + 1 buffers from a stream it
// advances by seq_len). The incomplete tail is dropped.
//
// Validation takes the last ceil(fraction * windows) windows. The training
// window just before them would share its last token with the first
// validation window, so it is dropped too: no training window contains a
// validation token.
//
//===----------------------------------------------------------------------===//

#include "kiln/Data/DataLoader.h"
#include "kiln/Support/Error.h"
#include "kiln/Support/Fnv128.h"
#include "kiln/Support/Json.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <optional>
#include <random>

namespace kiln {

namespace {

constexpr char kMagic[8] = {'K', 'I', 'L', 'N', 'T', 'O', 'K', '1'};
constexpr size_t kHeaderBytes = sizeof(kMagic) + sizeof(uint64_t);

std::string cachePath(const std::vector<std::string> &documents, const Tokenizer &tokenizer,
                      const std::string &cacheDir) {
  Fnv128 h;
  h.string("kiln token stream v1: encode(doc) + <|endoftext|> per document");
  uint64_t count = documents.size();
  h.bytes(&count, sizeof count);
  for (const std::string &doc : documents)
    h.string(doc);
  h.string(tokenizer.contentHash());
  return (std::filesystem::path(cacheDir) / ("tokens-" + h.hex() + ".bin")).string();
}

/// The cached stream, or nothing if the file is absent or not a complete,
/// well-formed cache for this tokenizer (then the caller re-tokenizes and
/// overwrites it). Host byte order: the cache is local, never shipped.
std::optional<std::vector<int32_t>> readCache(const std::string &path, int64_t vocabSize) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    return std::nullopt;
  std::string bytes;
  try {
    bytes = readFile(path);
  } catch (const Error &) {
    return std::nullopt;
  }
  uint64_t count = 0;
  if (bytes.size() < kHeaderBytes || std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0)
    return std::nullopt;
  std::memcpy(&count, bytes.data() + sizeof kMagic, sizeof count);
  if (count > (bytes.size() - kHeaderBytes) / sizeof(int32_t) ||
      bytes.size() != kHeaderBytes + count * sizeof(int32_t))
    return std::nullopt;
  std::vector<int32_t> tokens(count);
  std::memcpy(tokens.data(), bytes.data() + kHeaderBytes, count * sizeof(int32_t));
  for (int32_t id : tokens)
    if (id < 0 || id >= vocabSize)
      return std::nullopt;
  return tokens;
}

void writeCache(const std::string &path, const std::vector<int32_t> &tokens) {
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  if (ec)
    fail("{}: cannot create the token cache directory: {}",
         std::filesystem::path(path).parent_path().string(), ec.message());
  uint64_t count = tokens.size();
  std::string bytes(kHeaderBytes + count * sizeof(int32_t), '\0');
  std::memcpy(bytes.data(), kMagic, sizeof kMagic);
  std::memcpy(bytes.data() + sizeof kMagic, &count, sizeof count);
  std::memcpy(bytes.data() + kHeaderBytes, tokens.data(), count * sizeof(int32_t));
  writeFileAtomic(path, bytes);
}

std::vector<int32_t> tokenize(const std::vector<std::string> &documents,
                              const Tokenizer &tokenizer) {
  int32_t eos = tokenizer.specialTokenId("<|endoftext|>");
  std::vector<int32_t> stream;
  for (const std::string &doc : documents) {
    std::vector<int32_t> ids = tokenizer.encode(doc);
    stream.insert(stream.end(), ids.begin(), ids.end());
    stream.push_back(eos);
  }
  return stream;
}

/// A uniform draw from [0, bound) by rejection: the draws below 2^64 mod bound
/// are discarded so every residue is equally likely.
uint64_t uniformBelow(std::mt19937_64 &rng, uint64_t bound) {
  uint64_t threshold = (0 - bound) % bound;
  for (;;)
    if (uint64_t r = rng(); r >= threshold)
      return r % bound;
}

/// `items` permuted for (seed, epoch). Written out rather than std::shuffle
/// (and std::uniform_int_distribution), whose algorithms the standard leaves
/// to the implementation: the order must be the same on every platform.
/// mt19937_64 and seed_seq are fully specified. Fisher-Yates, from the back:
/// position i swaps with a uniform position in [0, i].
std::vector<int64_t> shuffled(std::vector<int64_t> items, uint64_t seed, uint64_t epoch) {
  std::seed_seq seq{uint32_t(seed), uint32_t(seed >> 32), uint32_t(epoch), uint32_t(epoch >> 32)};
  std::mt19937_64 rng(seq);
  for (size_t i = items.size(); i > 1; --i)
    std::swap(items[i - 1], items[uniformBelow(rng, i)]);
  return items;
}

} // namespace

DataLoader::DataLoader(const std::vector<std::string> &documents, const Tokenizer &tokenizer,
                       const DataLoaderOptions &options)
    : options_(options) {
  const DataLoaderOptions &o = options_;
  if (o.seqLen <= 0)
    fail("data.seq_len must be positive, got {}", o.seqLen);
  if (o.batchSize <= 0)
    fail("training.local_batch_size must be positive, got {}", o.batchSize);
  if (!(o.validationFraction >= 0 && o.validationFraction < 1))
    fail("data.validation_fraction must be in [0, 1), got {}", o.validationFraction);
  if (o.worldSize <= 0)
    fail("rank {} of world size {}: the data-parallel world size must be positive", o.rank,
         o.worldSize);
  if (o.rank < 0 || o.rank >= o.worldSize)
    fail("rank {} is not in [0, {}), the data-parallel world size", o.rank, o.worldSize);

  if (o.cacheDir.empty()) {
    stream_ = tokenize(documents, tokenizer);
  } else {
    std::string path = cachePath(documents, tokenizer, o.cacheDir);
    if (auto cached = readCache(path, tokenizer.vocabSize())) {
      stream_ = std::move(*cached);
      fromCache_ = true;
    } else {
      stream_ = tokenize(documents, tokenizer);
      writeCache(path, stream_);
    }
  }

  const int64_t n = totalTokens(), s = o.seqLen;
  const int64_t windows = n > s ? (n - 1) / s : 0;
  // ceil, minus a hair so 0.3 * 10 = 3.0000000000000004 stays 3.
  const int64_t held = int64_t(std::ceil(o.validationFraction * double(windows) - 1e-9));
  const int64_t firstHeld = windows - held;
  const int64_t train = held > 0 ? std::max<int64_t>(firstHeld - 1, 0) : windows;
  for (int64_t k = 0; k < train; ++k)
    trainWindows_.push_back(k * s);
  for (int64_t k = firstHeld; k < windows; ++k)
    validationWindows_.push_back(k * s);

  if (trainWindowsPerRank() == 0) {
    const int64_t needed = o.batchSize * o.worldSize;
    fail("too little data: {} tokens make {} windows of data.seq_len + 1 = {} tokens, {} for "
         "training ({} held out by data.validation_fraction = {}{}); {} rank(s) of batches of {} "
         "sequences (training.local_batch_size x data-parallel degree x microbatches) need at least "
         "{} training windows ({} tokens for training alone)",
         n, windows, s + 1, train, held, o.validationFraction,
         held > 0 && firstHeld > 0 ? ", 1 dropped at the boundary" : "", o.worldSize,
         o.batchSize, needed, needed * s + 1);
  }
}

int64_t DataLoader::totalTokens() const { return int64_t(stream_.size()); }

int64_t DataLoader::trainWindowsPerRank() const {
  // Every rank gets the same number of windows (the T mod R leftovers of the
  // shuffled order are unused this epoch) and of full batches, so
  // data-parallel ranks stay in step.
  int64_t perRank = int64_t(trainWindows_.size()) / options_.worldSize;
  return perRank / options_.batchSize * options_.batchSize;
}

int64_t DataLoader::validationWindows() const { return int64_t(validationWindows_.size()); }

bool DataLoader::loadedFromCache() const { return fromCache_; }

int64_t DataLoader::batchesPerEpoch() const {
  return trainWindowsPerRank() / options_.batchSize;
}

std::string DataLoader::fingerprint() const {
  Fnv128 h;
  h.bytes(stream_.data(), stream_.size() * sizeof(int32_t));
  return h.hex();
}

Tensor DataLoader::trainBatch(int64_t index) const {
  if (index < 0)
    fail("training batch index must be non-negative, got {}", index);
  const DataLoaderOptions &o = options_;
  const int64_t epoch = index / batchesPerEpoch(), batch = index % batchesPerEpoch();
  // Reshuffled per call: O(windows), negligible next to a training step, and
  // it keeps trainBatch stateless and safe to call from any thread.
  std::vector<int64_t> order = shuffled(trainWindows_, o.seed, uint64_t(epoch));
  Tensor out(DType::I64, {o.batchSize, o.seqLen + 1});
  int64_t *dst = out.mutableData<int64_t>();
  for (int64_t row = 0; row < o.batchSize; ++row) {
    // This rank's j-th window is position j * R + rank of the epoch's order.
    int64_t j = batch * o.batchSize + row;
    const int32_t *src = stream_.data() + order[j * o.worldSize + o.rank];
    std::copy(src, src + o.seqLen + 1, dst + row * (o.seqLen + 1));
  }
  return out;
}

std::vector<Tensor> DataLoader::validationBatches() const {
  const int64_t len = options_.seqLen + 1, count = validationWindows();
  std::vector<Tensor> batches;
  for (int64_t first = 0; first < count; first += options_.batchSize) {
    int64_t rows = std::min(options_.batchSize, count - first);
    Tensor batch(DType::I64, {rows, len});
    for (int64_t row = 0; row < rows; ++row) {
      const int32_t *src = stream_.data() + validationWindows_[first + row];
      std::copy(src, src + len, batch.mutableData<int64_t>() + row * len);
    }
    batches.push_back(std::move(batch));
  }
  return batches;
}

} // namespace kiln
