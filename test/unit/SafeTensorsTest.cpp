//===- SafeTensorsTest.cpp - safetensors reader/writer and checkpoints ----===//

#include "TestUtil.h"
#include "kiln/Runtime/SafeTensors.h"

#include <nlohmann/json.hpp>

#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

using namespace kiln;
using kiln::test::expectError;
using ::testing::HasSubstr;
namespace fs = std::filesystem;

using kiln::test::TempDir;

namespace {


void writeFile(const std::string &path, const std::string &bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

std::string slurp(const std::string &path) {
  std::stringstream s;
  s << std::ifstream(path, std::ios::binary).rdbuf();
  return s.str();
}

std::string u64le(uint64_t v) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i)
    out[i] = char(v >> (8 * i));
  return out;
}

/// A hand-made safetensors file: `header` verbatim, then `dataBytes` zeros.
std::string rawSafeTensors(const std::string &header, size_t dataBytes) {
  return u64le(header.size()) + header + std::string(dataBytes, '\0');
}

/// The JSON header of a safetensors file on disk.
std::string headerText(const std::string &path) {
  std::string bytes = slurp(path);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i)
    n = (n << 8) | uint8_t(bytes[i]);
  return bytes.substr(8, n);
}

/// A tensor whose bytes follow a pattern derived from `seed`, so different
/// tensors (and any misplaced byte range) are distinguishable.
Tensor patterned(DType dtype, Shape shape, int seed) {
  Tensor t(dtype, std::move(shape));
  auto *p = t.mutableData<uint8_t>();
  for (size_t i = 0; i < t.nbytes(); ++i)
    p[i] = uint8_t(seed * 37 + i * 11 + 1);
  return t;
}

std::vector<uint8_t> bytesOf(const Tensor &t) {
  auto *p = t.data<uint8_t>();
  return std::vector<uint8_t>(p, p + t.nbytes());
}

void expectSameTensor(const Tensor &actual, const Tensor &expected, const std::string &name) {
  SCOPED_TRACE(name);
  EXPECT_EQ(actual.dtype(), expected.dtype());
  EXPECT_EQ(actual.shape(), expected.shape());
  EXPECT_EQ(bytesOf(actual), bytesOf(expected));
}

/// Opening `path` must fail with "<path>: ..." mentioning every needle.
void expectOpenError(const std::string &path, std::vector<std::string> needles) {
  needles.insert(needles.begin(), path + ": ");
  expectError([&] { SafeTensorsFile::open(path); }, needles);
}

/// A FIFO at `path`. Should the code under test block opening it for reading
/// (the bug the FIFO tests guard against), a watchdog opens it for writing
/// every few seconds, which releases the reader: the test then fails on the
/// message instead of hanging. Removed again on destruction.
class Fifo {
public:
  explicit Fifo(std::string path) : path_(std::move(path)) {
    if (::mkfifo(path_.c_str(), 0600) != 0)
      throw std::runtime_error("mkfifo " + path_ + ": " + std::strerror(errno));
    watchdog_ = std::thread([this] {
      std::unique_lock<std::mutex> lock(mutex_);
      while (!cv_.wait_for(lock, std::chrono::seconds(3), [this] { return done_; })) {
        // Non-blocking: fails with ENXIO unless a reader is waiting.
        int fd = ::open(path_.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
        if (fd >= 0)
          ::close(fd);
      }
    });
  }
  ~Fifo() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      done_ = true;
    }
    cv_.notify_all();
    watchdog_.join();
    ::unlink(path_.c_str());
  }
  const std::string &path() const { return path_; }

private:
  std::string path_;
  std::mutex mutex_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread watchdog_;
};

TensorMap allDTypesMap() {
  TensorMap m;
  m["a.f32"] = patterned(DType::F32, {2, 3}, 1);
  m["b.f16"] = patterned(DType::F16, {5}, 2); // odd byte counts exercise alignment
  m["c.bf16"] = patterned(DType::BF16, {3, 1, 3}, 3);
  m["d.i64"] = patterned(DType::I64, {}, 4); // 0-d scalar
  m["e.i32"] = patterned(DType::I32, {7}, 5);
  m["f.empty"] = patterned(DType::F32, {0, 4}, 6);
  m["g.i64"] = patterned(DType::I64, {2, 2}, 7);
  return m;
}

} // namespace

//===----------------------------------------------------------------------===//
// Writer / reader round trips
//===----------------------------------------------------------------------===//

TEST(SafeTensors, RoundTripAllDTypesAndShapes) {
  TempDir tmp;
  std::string path = tmp.file("all.safetensors");
  TensorMap written = allDTypesMap();
  std::map<std::string, std::string> meta{{"format", "pt"}, {"note", "kiln test"}};
  writeSafeTensors(path, written, meta);
  EXPECT_EQ(tmp.list(), std::vector<std::string>{"all.safetensors"}) << "no temp file left";

  auto file = SafeTensorsFile::open(path);
  EXPECT_EQ(file->path(), path);
  EXPECT_EQ(file->metadata(), meta);
  ASSERT_EQ(file->names().size(), written.size());
  for (const auto &[name, t] : written) {
    ASSERT_TRUE(file->contains(name)) << name;
    expectSameTensor(file->get(name), t, name);
  }
  EXPECT_FALSE(file->contains("__metadata__"));

  // names() is in data order; the buffer is contiguous (no gaps, as the
  // reference reader demands) and every tensor is aligned to its element.
  std::string header = headerText(path);
  EXPECT_EQ((8 + header.size()) % 8, 0u);
  const uint8_t *expectedNext = file->get(file->names().front()).data<uint8_t>();
  size_t total = 0;
  for (const std::string &name : file->names()) {
    Tensor t = file->get(name);
    EXPECT_EQ(t.data<uint8_t>(), expectedNext) << name;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.rawData()) % dtypeSize(t.dtype()), 0u) << name;
    expectedNext += t.nbytes();
    total += t.nbytes();
  }
  EXPECT_EQ(fs::file_size(path), 8 + header.size() + total);
}

TEST(SafeTensors, HeaderKeysAreSortedAndMetadataOmittedWhenEmpty) {
  TempDir tmp;
  std::string path = tmp.file("m.safetensors");
  writeSafeTensors(path, allDTypesMap());
  std::string header = headerText(path);
  EXPECT_THAT(header, ::testing::Not(HasSubstr("__metadata__")));
  std::vector<std::string> keys;
  auto parsed = nlohmann::ordered_json::parse(header); // keeps file order
  for (const auto &kv : parsed.items())
    keys.push_back(kv.key());
  EXPECT_TRUE(std::is_sorted(keys.begin(), keys.end()));
  EXPECT_TRUE(SafeTensorsFile::open(path)->metadata().empty());
}

TEST(SafeTensors, EmptyTensorMapRoundTrips) {
  TempDir tmp;
  std::string path = tmp.file("empty.safetensors");
  writeSafeTensors(path, {});
  EXPECT_TRUE(SafeTensorsFile::open(path)->names().empty());
}

TEST(SafeTensors, OverwriteReplacesFileAtomically) {
  TempDir tmp;
  std::string path = tmp.file("w.safetensors");
  writeSafeTensors(path, {{"x", patterned(DType::F32, {4}, 1)}});
  Tensor second = patterned(DType::I32, {2}, 9);
  writeSafeTensors(path, {{"y", second}});
  auto file = SafeTensorsFile::open(path);
  EXPECT_EQ(file->names(), std::vector<std::string>{"y"});
  expectSameTensor(file->get("y"), second, "y");
  EXPECT_EQ(tmp.list(), std::vector<std::string>{"w.safetensors"});
}

TEST(SafeTensors, WriteFailureNamesPathAndLeavesNoTempFile) {
  TempDir tmp;
  std::string missingDir = tmp.file("no/such/dir.safetensors");
  expectError([&] { writeSafeTensors(missingDir, {}); }, {missingDir});
  // rename() onto a directory fails after the temp file was written.
  std::string dirTarget = tmp.file("target");
  fs::create_directory(dirTarget);
  expectError([&] { writeSafeTensors(dirTarget, {{"x", patterned(DType::F32, {2}, 1)}}); },
              {dirTarget, "rename"});
  EXPECT_EQ(tmp.list(), std::vector<std::string>{"target"});
}

TEST(SafeTensors, ViewsKeepTheMappingAlive) {
  TempDir tmp;
  std::string path = tmp.file("v.safetensors");
  Tensor original = patterned(DType::BF16, {8, 8}, 3);
  writeSafeTensors(path, {{"w", original}});
  Tensor view = SafeTensorsFile::open(path)->get("w"); // file object dropped here
  fs::remove(path);                                  // the mapping outlives the name too
  expectSameTensor(view, original, "w");
}

// A header whose length leaves the data unaligned to its elements (the
// format allows it; writers pad to 8 bytes): the tensor reads from an aligned
// copy, the same values (under UBSan a misaligned load would be reported).
TEST(SafeTensors, UnalignedDataReadsTheSameValues) {
  TempDir tmp;
  std::string path = tmp.file("odd.safetensors");
  std::string header = R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,12]}})";
  while ((8 + header.size()) % 4 != 1)
    header += ' ';
  const float values[3] = {1.5f, -2.0f, 3.25f};
  std::string data(reinterpret_cast<const char *>(values), sizeof values);
  writeFile(path, u64le(header.size()) + header + data);
  Tensor w = SafeTensorsFile::open(path)->get("w");
  ASSERT_EQ(reinterpret_cast<uintptr_t>(w.rawData()) % alignof(float), 0u);
  ASSERT_EQ(w.numel(), 3);
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(w.data<float>()[i], values[i]) << i;
}

TEST(SafeTensors, GetMissingTensorNamesFileAndTensor) {
  TempDir tmp;
  std::string path = tmp.file("g.safetensors");
  writeSafeTensors(path, {{"x", patterned(DType::F32, {1}, 1)}});
  auto file = SafeTensorsFile::open(path);
  expectError([&] { file->get("nope"); }, {path, "no tensor named 'nope'"});
}

//===----------------------------------------------------------------------===//
// Validation: file-level problems
//===----------------------------------------------------------------------===//

TEST(SafeTensorsErrors, MissingFile) {
  TempDir tmp;
  expectOpenError(tmp.file("absent.safetensors"), {std::strerror(ENOENT)});
}

TEST(SafeTensorsErrors, Directory) {
  TempDir tmp;
  expectOpenError(tmp.path(), {"is a directory, not a regular file"});
}

TEST(SafeTensorsErrors, FifoIsRefusedWithoutBlocking) {
  TempDir tmp;
  Fifo fifo(tmp.file("model.safetensors"));
  expectOpenError(fifo.path(), {"is a FIFO, not a regular file"});
}

TEST(SafeTensorsErrors, EmptyAndTruncatedFiles) {
  TempDir tmp;
  for (size_t n : {0, 5}) {
    std::string path = tmp.file("short" + std::to_string(n));
    writeFile(path, std::string(n, '\x01'));
    expectOpenError(path, {std::to_string(n) + " bytes", "too small"});
  }
}

TEST(SafeTensorsErrors, HeaderLengthPastEndOfFile) {
  TempDir tmp;
  std::string path = tmp.file("len.safetensors");
  writeFile(path, u64le(1000) + "{}");
  expectOpenError(path, {"header length 1000", "10 bytes"});
  writeFile(path, u64le(~uint64_t(0)) + "{}"); // must not overflow 8 + N
  expectOpenError(path, {"header length 18446744073709551615"});
}

TEST(SafeTensorsErrors, HeaderLengthAboveLimit) {
  TempDir tmp;
  std::string path = tmp.file("huge.safetensors");
  uint64_t n = (100ull << 20) + 1;
  writeFile(path, u64le(n));
  fs::resize_file(path, 8 + n); // sparse: the length check must fire before parsing
  expectOpenError(path, {"header length " + std::to_string(n), "limit"});
}

//===----------------------------------------------------------------------===//
// Validation: header contents (one parameterized case each)
//===----------------------------------------------------------------------===//

namespace {
struct BadHeader {
  const char *name;
  std::string header;
  size_t dataBytes;
  std::vector<std::string> needles;
};

std::ostream &operator<<(std::ostream &os, const BadHeader &c) { return os << c.name; }

/// A header with the single tensor 'w'; `fields` is the entry's JSON body.
std::string oneTensor(const std::string &fields) { return R"({"w": {)" + fields + "}}"; }

const BadHeader kBadHeaders[] = {
    {"InvalidJson", R"({"w": )", 0, {"header: malformed JSON", "parse error"}},
    {"NonObjectHeader", "[1, 2]", 0, {"must be a JSON object", "array"}},
    {"NonObjectEntry", R"({"w": 3})", 0, {"tensor 'w'", "must be an object"}},
    {"MissingDtype", oneTensor(R"("shape": [1], "data_offsets": [0, 4])"), 4,
     {"tensor 'w'", "'dtype'"}},
    {"NonStringDtype", oneTensor(R"("dtype": 4, "shape": [1], "data_offsets": [0, 4])"), 4,
     {"tensor 'w'", "'dtype' must be a string"}},
    {"UnknownDtype", oneTensor(R"("dtype": "F64", "shape": [1], "data_offsets": [0, 8])"), 8,
     {"tensor 'w'", "unsupported dtype 'F64'", "F32, F16, BF16, I64, I32"}},
    {"BoolDtype", oneTensor(R"("dtype": "BOOL", "shape": [1], "data_offsets": [0, 1])"), 1,
     {"tensor 'w'", "'BOOL'", "supported dtypes"}},
    {"MissingShape", oneTensor(R"("dtype": "F32", "data_offsets": [0, 4])"), 4,
     {"tensor 'w'", "'shape'"}},
    {"NonArrayShape", oneTensor(R"("dtype": "F32", "shape": 4, "data_offsets": [0, 16])"), 16,
     {"tensor 'w'", "'shape' must be an array"}},
    {"NegativeShape", oneTensor(R"("dtype": "F32", "shape": [2, -1], "data_offsets": [0, 0])"),
     0, {"tensor 'w'", "shape", "-1"}},
    {"FractionalShape", oneTensor(R"("dtype": "F32", "shape": [1.5], "data_offsets": [0, 4])"),
     4, {"tensor 'w'", "shape", "1.5"}},
    {"OverflowingShape",
     oneTensor(R"("dtype": "F32", "shape": [4611686018427387904, 4], "data_offsets": [0, 0])"),
     0, {"tensor 'w'", "overflows"}},
    {"LyingByteCount",
     R"({"model.norm.weight": {"dtype": "F32", "shape": [64], "data_offsets": [0, 252]}})", 256,
     {"tensor 'model.norm.weight': shape [64] x F32 needs 256 bytes but data_offsets span 252"}},
    {"MissingOffsets", oneTensor(R"("dtype": "F32", "shape": [1])"), 4,
     {"tensor 'w'", "'data_offsets'"}},
    {"OffsetsWrongArity", oneTensor(R"("dtype": "F32", "shape": [1], "data_offsets": [0])"), 4,
     {"tensor 'w'", "'data_offsets' must be an array of 2"}},
    {"NegativeOffset", oneTensor(R"("dtype": "F32", "shape": [1], "data_offsets": [-4, 0])"), 4,
     {"tensor 'w'", "data_offsets", "negative"}},
    {"ReversedOffsets", oneTensor(R"("dtype": "F32", "shape": [1], "data_offsets": [8, 4])"), 8,
     {"tensor 'w'", "begin > end"}},
    {"OffsetsPastEnd", oneTensor(R"("dtype": "F32", "shape": [2], "data_offsets": [0, 8])"), 4,
     {"tensor 'w'", "data_offsets [0, 8]", "past the end of the 4-byte data buffer"}},
    {"OverlappingRanges",
     R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
         "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})",
     12, {"tensor 'b'", "overlap tensor 'a'"}},
    {"MetadataNotObject", R"({"__metadata__": ["x"]})", 0, {"'__metadata__' must be an object"}},
    {"MetadataNotString", R"({"__metadata__": {"step": 5}})", 0,
     {"'__metadata__' entry 'step' must be a string"}},
};

class SafeTensorsBadHeader : public ::testing::TestWithParam<BadHeader> {};
} // namespace

TEST_P(SafeTensorsBadHeader, IsRejectedWithANamedError) {
  TempDir tmp;
  std::string path = tmp.file("bad.safetensors");
  writeFile(path, rawSafeTensors(GetParam().header, GetParam().dataBytes));
  expectOpenError(path, GetParam().needles);
}

INSTANTIATE_TEST_SUITE_P(All, SafeTensorsBadHeader, ::testing::ValuesIn(kBadHeaders),
                         [](const auto &info) { return std::string(info.param.name); });

// The same shapes of header, made valid, must be accepted: guards against the
// error cases passing for an unrelated reason (e.g. a typo in the JSON).
TEST(SafeTensors, AcceptsHandWrittenHeaderWithGapsAndEmptyTensors) {
  TempDir tmp;
  std::string path = tmp.file("ok.safetensors");
  writeFile(path, rawSafeTensors(
                      R"({"__metadata__": {"k": "v"},
                          "b": {"dtype": "F32", "shape": [2], "data_offsets": [8, 16]},
                          "a": {"dtype": "I32", "shape": [1], "data_offsets": [0, 4]},
                          "z": {"dtype": "BF16", "shape": [0, 3], "data_offsets": [16, 16]}})",
                      16));
  auto file = SafeTensorsFile::open(path);
  EXPECT_EQ(file->names(), (std::vector<std::string>{"a", "b", "z"}));
  EXPECT_EQ(file->get("z").shape(), (Shape{0, 3}));
  EXPECT_EQ(file->metadata().at("k"), "v");
}

//===----------------------------------------------------------------------===//
// Checkpoints
//===----------------------------------------------------------------------===//

namespace {
/// Writes two shards and an index; `extraListed` names a tensor that the
/// index claims is in shard 1 but is not.
void writeShardedCheckpoint(const TempDir &tmp, const TensorMap &shard1,
                            const TensorMap &shard2, const std::string &extraListed = "") {
  const std::string s1 = "model-00001-of-00002.safetensors";
  const std::string s2 = "model-00002-of-00002.safetensors";
  writeSafeTensors(tmp.file(s1), shard1);
  writeSafeTensors(tmp.file(s2), shard2);
  nlohmann::json index = {{"metadata", {{"total_size", 0}}}, {"weight_map", nlohmann::json::object()}};
  for (const auto &kv : shard1)
    index["weight_map"][kv.first] = s1;
  for (const auto &kv : shard2)
    index["weight_map"][kv.first] = s2;
  if (!extraListed.empty())
    index["weight_map"][extraListed] = s1;
  writeFile(tmp.file("model.safetensors.index.json"), index.dump(2));
}
} // namespace

TEST(Checkpoint, SingleFileAndDirectoryWithModelSafetensors) {
  TempDir tmp;
  TensorMap tensors = allDTypesMap();
  std::string path = tmp.file("model.safetensors");
  writeSafeTensors(path, tensors);
  for (const std::string &p : {path, tmp.path()}) {
    Checkpoint ckpt = Checkpoint::open(p);
    EXPECT_EQ(ckpt.path(), p);
    ASSERT_EQ(ckpt.names().size(), tensors.size());
    for (const auto &[name, t] : tensors)
      expectSameTensor(ckpt.get(name), t, name);
    EXPECT_FALSE(ckpt.contains("nope"));
    expectError([&] { ckpt.get("x"); }, {p + ": no tensor named 'x'"});
  }
}

TEST(Checkpoint, ShardedIndexResolvesEveryTensor) {
  TempDir tmp;
  Tensor a = patterned(DType::F32, {4, 2}, 1), b = patterned(DType::BF16, {3}, 2);
  writeShardedCheckpoint(tmp, {{"layer.a", a}}, {{"layer.b", b}});
  Checkpoint ckpt = Checkpoint::open(tmp.path());
  EXPECT_EQ(ckpt.names(), (std::vector<std::string>{"layer.a", "layer.b"}));
  expectSameTensor(ckpt.get("layer.a"), a, "layer.a");
  expectSameTensor(ckpt.get("layer.b"), b, "layer.b");
}

TEST(Checkpoint, IndexEntryMissingFromShard) {
  TempDir tmp;
  writeShardedCheckpoint(tmp, {{"a", patterned(DType::F32, {1}, 1)}},
                         {{"b", patterned(DType::F32, {1}, 2)}}, "ghost");
  expectError([&] { Checkpoint::open(tmp.path()); },
              {"model.safetensors.index.json", "tensor 'ghost'",
               "model-00001-of-00002.safetensors"});
}

TEST(Checkpoint, IndexNamingAMissingShardFile) {
  TempDir tmp;
  writeFile(tmp.file("model.safetensors.index.json"),
            R"({"weight_map": {"a": "gone.safetensors"}})");
  expectError([&] { Checkpoint::open(tmp.path()); },
              {tmp.file("gone.safetensors"), std::strerror(ENOENT)});
}

TEST(Checkpoint, MalformedIndexNamesIndexFile) {
  TempDir tmp;
  std::string index = tmp.file("model.safetensors.index.json");
  for (const char *text : {"{not json", R"({"metadata": {}})", R"({"weight_map": {"a": 1}})"}) {
    writeFile(index, text);
    expectError([&] { Checkpoint::open(tmp.path()); }, {index});
  }
}

TEST(Checkpoint, DirectoryWithoutWeightsOrMissingPath) {
  TempDir tmp;
  expectError([&] { Checkpoint::open(tmp.path()); },
              {tmp.path() + ": no model.safetensors or model.safetensors.index.json"});
  std::string missing = tmp.file("nowhere");
  expectError([&] { Checkpoint::open(missing); }, {missing, std::strerror(ENOENT)});
}

TEST(Checkpoint, FifoOrDirectoryWhereAFileBelongsIsRefused) {
  // The checkpoint path itself.
  TempDir tmp;
  {
    Fifo fifo(tmp.file("ckpt"));
    expectError([&] { Checkpoint::open(fifo.path()); },
                {fifo.path() + ": is a FIFO, not a regular file or directory"});
  }
  // model.safetensors in a directory.
  TempDir single;
  {
    Fifo fifo(single.file("model.safetensors"));
    expectError([&] { Checkpoint::open(single.path()); },
                {fifo.path() + ": is a FIFO, not a regular file"});
  }
  fs::create_directory(single.file("model.safetensors"));
  expectError([&] { Checkpoint::open(single.path()); },
              {single.file("model.safetensors") + ": is a directory, not a regular file"});
  // The shard index, and a shard it names.
  TempDir sharded;
  std::string index = sharded.file("model.safetensors.index.json");
  {
    Fifo fifo(index);
    expectError([&] { Checkpoint::open(sharded.path()); },
                {index + ": is a FIFO, not a regular file"});
  }
  writeFile(index, R"({"weight_map": {"a": "shard.safetensors"}})");
  Fifo shard(sharded.file("shard.safetensors"));
  expectError([&] { Checkpoint::open(sharded.path()); },
              {shard.path() + ": is a FIFO, not a regular file"});
}

//===----------------------------------------------------------------------===//
// The real tiny Qwen3 fixture (written by PyTorch/safetensors)
//===----------------------------------------------------------------------===//

TEST(SafeTensorsFixture, F32AndBf16CheckpointsAgree) {
  const std::string dir = std::string(KILN_TEST_DATA_DIR) + "/qwen3-dense-tiny";
  Checkpoint f32 = Checkpoint::open(dir + "/model.safetensors");
  Checkpoint bf16 = Checkpoint::open(dir + "/model_bf16.safetensors");
  EXPECT_EQ(Checkpoint::open(dir).names(), f32.names()); // directory -> model.safetensors

  Tensor embed = f32.get("model.embed_tokens.weight");
  EXPECT_EQ(embed.dtype(), DType::F32);
  EXPECT_EQ(embed.shape(), (Shape{512, 64}));
  EXPECT_FALSE(f32.contains("lm_head.weight")) << "embeddings are tied";
  EXPECT_EQ(SafeTensorsFile::open(dir + "/model.safetensors")->metadata().at("format"), "pt");

  ASSERT_EQ(bf16.names(), f32.names());
  for (const std::string &name : f32.names()) {
    SCOPED_TRACE(name);
    Tensor ref = f32.get(name), half = bf16.get(name);
    ASSERT_EQ(half.dtype(), DType::BF16);
    ASSERT_EQ(half.shape(), ref.shape());
    Tensor widened = half.toF32();
    const float *a = ref.data<float>(), *b = widened.data<float>();
    for (int64_t i = 0; i < ref.numel(); ++i)
      ASSERT_LE(std::fabs(a[i] - b[i]), std::ldexp(std::fabs(a[i]), -8)) << "element " << i;
  }
}
