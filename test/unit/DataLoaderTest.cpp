//===- DataLoaderTest.cpp - Packed, shuffled token windows ----------------===//
//
// Runs against the real Qwen3 tokenizer but relies only on properties that
// hold for any tokenizer: the expected stream is rebuilt from encode() and
// specialTokenId(), and batches are checked as slices of it.
//
//===----------------------------------------------------------------------===//

#include "TestUtil.h"
#include "kiln/Data/DataLoader.h"
#include "kiln/Support/Json.h"

#include <cmath>
#include <filesystem>
#include <fstream>

using namespace kiln;
using kiln::test::expectError;
using kiln::test::TempDir;
namespace fs = std::filesystem;

namespace {

using Row = std::vector<int64_t>;

/// Varied sentences of varied lengths.
std::vector<std::string> corpus(int documents = 40) {
  std::vector<std::string> docs;
  for (int i = 0; i < documents; ++i) {
    std::string doc;
    for (int j = 0; j <= i % 3; ++j)
      doc += fmt::format("Line {}.{}: the {} brown fox jumped over {} lazy dogs near river {}. ",
                         i, j, i * 7 % 13, i * 3 + j, i * i);
    docs.push_back(doc);
  }
  return docs;
}

std::vector<Row> rows(const Tensor &t) {
  EXPECT_EQ(t.dtype(), DType::I64);
  EXPECT_EQ(t.rank(), 2u);
  std::vector<Row> out;
  for (int64_t r = 0; r < t.dim(0); ++r)
    out.emplace_back(t.data<int64_t>() + r * t.dim(1), t.data<int64_t>() + (r + 1) * t.dim(1));
  return out;
}

/// The rows of training batches [first, first + count), in order.
std::vector<Row> trainRows(const DataLoader &dl, int64_t first, int64_t count) {
  std::vector<Row> out;
  for (int64_t b = first; b < first + count; ++b)
    for (Row &row : rows(dl.trainBatch(b)))
      out.push_back(std::move(row));
  return out;
}

std::vector<Row> sorted(std::vector<Row> v) {
  std::sort(v.begin(), v.end());
  return v;
}

std::vector<Row> prefix(std::vector<Row> v, size_t n) {
  v.resize(std::min(n, v.size()));
  return v;
}

// Windows are compared by contents rather than by offset, so a tokenizer that
// happens to produce two identical windows cannot break the tests.
class DataLoaderTest : public ::testing::Test {
protected:
  void SetUp() override {
#ifndef KILN_TOKENIZER_JSON
    FAIL() << "KILN_TOKENIZER_JSON is not defined; build the tests through CMake";
#else
    if (!fs::exists(KILN_TOKENIZER_JSON))
      FAIL() << KILN_TOKENIZER_JSON << " is missing: run scripts/fetch-assets.sh";
    static std::unique_ptr<Tokenizer> loaded = Tokenizer::load(KILN_TOKENIZER_JSON);
    tok = loaded.get();
#endif
    docs = corpus();
    for (const std::string &doc : docs) {
      for (int32_t id : tok->encode(doc))
        stream.push_back(id);
      stream.push_back(tok->specialTokenId("<|endoftext|>"));
    }
    windows = (int64_t(stream.size()) - 1) / kSeq;
  }

  DataLoaderOptions options(int64_t batchSize = 1) const {
    DataLoaderOptions o;
    o.seqLen = kSeq;
    o.batchSize = batchSize;
    o.seed = 7;
    return o;
  }

  /// Windows [from, to) of the expected stream concat(encode(doc) + EOS):
  /// window k = stream[k*s, k*s + s].
  std::vector<Row> windowRows(int64_t from, int64_t to) const {
    std::vector<Row> out;
    for (int64_t k = from; k < to; ++k)
      out.emplace_back(stream.begin() + k * kSeq, stream.begin() + k * kSeq + kSeq + 1);
    return out;
  }

  static constexpr int64_t kSeq = 16;
  const Tokenizer *tok = nullptr;
  std::vector<std::string> docs;
  std::vector<int64_t> stream;
  int64_t windows = 0;
};

// The stream is encode(doc) + EOS per document; an epoch visits every window
// stream[k*s, k*s+s] (stride s, incomplete tail dropped) once, shuffled.
TEST_F(DataLoaderTest, EpochIsAPermutationOfStreamWindows) {
  DataLoader dl(docs, *tok, options());
  EXPECT_EQ(dl.totalTokens(), int64_t(stream.size()));
  EXPECT_EQ(dl.trainWindowsPerRank(), windows);
  EXPECT_EQ(dl.validationWindows(), 0);
  EXPECT_TRUE(dl.validationBatches().empty());
  EXPECT_FALSE(dl.loadedFromCache());
  std::vector<Row> epoch = trainRows(dl, 0, windows), inOrder = windowRows(0, windows);
  EXPECT_EQ(sorted(epoch), sorted(inOrder));
  EXPECT_NE(epoch, inOrder) << "not shuffled";
}

// Batch i of size B is windows iB .. iB+B-1 of the epoch order; the partial
// last batch is dropped and index batchesPerEpoch starts epoch 1.
TEST_F(DataLoaderTest, BatchesAreConsecutiveWindowsOfTheOrder) {
  DataLoader single(docs, *tok, options(1)), batched(docs, *tok, options(5));
  const int64_t perEpoch = windows / 5;
  EXPECT_EQ(batched.trainWindowsPerRank(), perEpoch * 5);
  EXPECT_EQ(batched.trainBatch(0).shape(), (Shape{5, kSeq + 1}));
  EXPECT_EQ(trainRows(batched, 0, perEpoch), prefix(trainRows(single, 0, windows), perEpoch * 5));
  EXPECT_EQ(trainRows(batched, perEpoch, 1), prefix(trainRows(single, windows, windows), 5));
}

// Same seed, same order; another seed or another epoch, another order of the
// same windows.
TEST_F(DataLoaderTest, ShuffleIsDeterministicPerSeedAndEpoch) {
  DataLoaderOptions other = options();
  other.seed = 8;
  DataLoader a(docs, *tok, options()), b(docs, *tok, options()), c(docs, *tok, other);
  std::vector<Row> epoch0 = trainRows(a, 0, windows), epoch1 = trainRows(a, windows, windows);
  EXPECT_EQ(trainRows(b, 0, 2 * windows), trainRows(a, 0, 2 * windows));
  EXPECT_EQ(trainRows(b, 5 * windows + 3, 1), trainRows(a, 5 * windows + 3, 1));
  EXPECT_NE(trainRows(c, 0, windows), epoch0);
  EXPECT_NE(epoch1, epoch0);
  EXPECT_EQ(sorted(epoch1), sorted(epoch0));
}

// Rank r of R takes positions r, r+R, ... of the epoch order: ranks see
// disjoint positions, equally many, together the first R*floor(T/R).
TEST_F(DataLoaderTest, RanksTakeStridedDisjointPositions) {
  const int64_t world = 3, perRank = windows / world;
  DataLoader whole(docs, *tok, options());
  for (int64_t epoch = 0; epoch < 2; ++epoch) {
    std::vector<Row> global = trainRows(whole, epoch * windows, windows), union_;
    for (int64_t rank = 0; rank < world; ++rank) {
      DataLoaderOptions o = options();
      o.rank = rank, o.worldSize = world;
      DataLoader dl(docs, *tok, o);
      ASSERT_EQ(dl.trainWindowsPerRank(), perRank);
      std::vector<Row> mine = trainRows(dl, epoch * perRank, perRank);
      for (int64_t j = 0; j < perRank; ++j)
        EXPECT_EQ(mine[j], global[j * world + rank]) << "rank " << rank << " window " << j;
      union_.insert(union_.end(), mine.begin(), mine.end());
    }
    EXPECT_EQ(sorted(union_), sorted(prefix(global, world * perRank)));
  }
}

// The last ceil(f * windows) windows are validation, in order; training is
// windows [0, firstHeld - 1): the window just before validation (which would
// share its last token with it) is dropped, so training ends at token
// (firstHeld - 1) * s, before validation starts at firstHeld * s.
TEST_F(DataLoaderTest, ValidationIsAHeldOutTail) {
  DataLoaderOptions o = options(3);
  o.validationFraction = 0.2;
  DataLoader dl(docs, *tok, o);
  const int64_t held = int64_t(std::ceil(0.2 * windows - 1e-9)), firstHeld = windows - held;
  ASSERT_EQ(dl.validationWindows(), held);
  std::vector<Row> validation;
  std::vector<Tensor> batches = dl.validationBatches();
  for (size_t i = 0; i < batches.size(); ++i) {
    EXPECT_EQ(batches[i].dim(0), i + 1 < batches.size() ? 3 : (held - 1) % 3 + 1);
    for (Row &row : rows(batches[i]))
      validation.push_back(std::move(row));
  }
  EXPECT_EQ(validation, windowRows(firstHeld, windows));

  EXPECT_EQ(dl.trainWindowsPerRank(), (firstHeld - 1) / 3 * 3);
  DataLoaderOptions single = o;
  single.batchSize = 1;
  EXPECT_EQ(sorted(trainRows(DataLoader(docs, *tok, single), 0, firstHeld - 1)),
            sorted(windowRows(0, firstHeld - 1)));
}

TEST_F(DataLoaderTest, CacheRoundTripAndCorruptionFallback) {
  TempDir dir;
  DataLoaderOptions o = options(2);
  o.cacheDir = dir.file("cache");
  DataLoader first(docs, *tok, o);
  EXPECT_FALSE(first.loadedFromCache());
  std::vector<std::string> files;
  for (const auto &e : fs::directory_iterator(o.cacheDir))
    files.push_back(e.path().string());
  ASSERT_EQ(files.size(), 1u);
  const std::string cache = files[0];
  EXPECT_THAT(fs::path(cache).filename().string(),
              ::testing::MatchesRegex("tokens-[0-9a-f]+\\.bin"));
  EXPECT_EQ(fs::file_size(cache), 16 + 4 * stream.size());
  EXPECT_EQ(kiln::readFile(cache).substr(0, 8), "KILNTOK1");

  auto expectSameBatches = [&](const DataLoader &dl) {
    EXPECT_EQ(dl.totalTokens(), first.totalTokens());
    for (int64_t b : {0, 1, 7})
      EXPECT_EQ(rows(dl.trainBatch(b)), rows(first.trainBatch(b)));
  };
  DataLoader second(docs, *tok, o);
  EXPECT_TRUE(second.loadedFromCache());
  expectSameBatches(second);

  std::vector<std::string> fewer(docs.begin(), docs.end() - 1);
  EXPECT_FALSE(DataLoader(fewer, *tok, o).loadedFromCache());
  EXPECT_EQ(std::distance(fs::directory_iterator(o.cacheDir), fs::directory_iterator()), 2);

  for (auto corrupt : {+[](std::string &b) { b.resize(b.size() - 3); },
                       +[](std::string &b) { b[0] = 'X'; },
                       +[](std::string &b) { b[8] ^= 1; }}) {
    std::string bytes = kiln::readFile(cache);
    corrupt(bytes);
    std::ofstream(cache, std::ios::binary | std::ios::trunc) << bytes;
    DataLoader fallback(docs, *tok, o);
    EXPECT_FALSE(fallback.loadedFromCache());
    expectSameBatches(fallback);
    DataLoader reloaded(docs, *tok, o);
    EXPECT_TRUE(reloaded.loadedFromCache());
    expectSameBatches(reloaded);
  }
}

TEST_F(DataLoaderTest, OptionErrorsNameTheOption) {
  auto expectOptionError = [&](auto edit, const std::string &fragment) {
    DataLoaderOptions o = options();
    edit(o);
    expectError([&] { DataLoader(docs, *tok, o); }, {fragment});
  };
  expectOptionError([](DataLoaderOptions &o) { o.seqLen = 0; }, "data.seq_len");
  expectOptionError([](DataLoaderOptions &o) { o.batchSize = -1; }, "training.local_batch_size");
  expectOptionError([](DataLoaderOptions &o) { o.validationFraction = 1; }, "data.validation_fraction");
  expectOptionError([](DataLoaderOptions &o) { o.validationFraction = -0.1; }, "data.validation_fraction");
  expectOptionError([](DataLoaderOptions &o) { o.validationFraction = NAN; }, "data.validation_fraction");
  expectOptionError([](DataLoaderOptions &o) { o.rank = 2, o.worldSize = 2; }, "rank 2");
  expectOptionError([](DataLoaderOptions &o) { o.rank = -1; }, "rank -1");
  expectOptionError([](DataLoaderOptions &o) { o.worldSize = 0; }, "world size must be positive");
}

// Too few tokens for one batch per rank: the error says what exists and what
// is needed.
TEST_F(DataLoaderTest, TooLittleDataSaysWhatIsNeeded) {
  std::vector<std::string> tiny = {"Hello."};
  const int64_t tokens = int64_t(tok->encode(tiny[0]).size()) + 1;
  DataLoaderOptions o = options();
  o.seqLen = 64;
  expectError([&] { DataLoader(tiny, *tok, o); },
              {fmt::format("{} tokens make 0 windows", tokens), "at least 1 training windows"});

  o = options(4);
  o.worldSize = windows;
  expectError([&] { DataLoader(docs, *tok, o); },
              {fmt::format("{} windows", windows), fmt::format("{} rank(s)", windows),
               fmt::format("at least {} training windows", 4 * windows)});
}

} // namespace
