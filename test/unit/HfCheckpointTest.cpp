//===- HfCheckpointTest.cpp - HF checkpoint directories and diffs ---------===//

#include "TestUtil.h"
#include "kiln/Runtime/HfCheckpoint.h"
#include "kiln/Support/Json.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>

using namespace kiln;
using kiln::test::dataPath;
using kiln::test::expectError;
using ::testing::HasSubstr;
namespace fs = std::filesystem;

using kiln::test::TempDir;

namespace {


/// Names of the entries of `dir`, sorted.
std::vector<std::string> listDir(const std::string &dir) {
  std::vector<std::string> out;
  for (const auto &e : fs::directory_iterator(dir))
    out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

/// F32 tensor of `n` elements whose values depend on `seed`.
Tensor filled(int64_t n, float seed) {
  Tensor t(DType::F32, {n});
  for (int64_t i = 0; i < n; ++i)
    t.mutableData<float>()[i] = seed + 0.25f * float(i);
  return t;
}

std::vector<uint8_t> bytesOf(const Tensor &t) {
  auto *p = t.data<uint8_t>();
  return std::vector<uint8_t>(p, p + t.nbytes());
}

/// Every tensor of `expected` reads back from `path` bit-exactly, and nothing else.
void expectCheckpointHolds(const std::string &path, const TensorMap &expected) {
  Checkpoint ckpt = Checkpoint::open(path);
  std::vector<std::string> names;
  for (const auto &kv : expected)
    names.push_back(kv.first);
  EXPECT_EQ(ckpt.names(), names);
  for (const auto &[name, t] : expected) {
    SCOPED_TRACE(name);
    Tensor got = ckpt.get(name);
    EXPECT_EQ(got.dtype(), t.dtype());
    EXPECT_EQ(got.shape(), t.shape());
    EXPECT_EQ(bytesOf(got), bytesOf(t));
  }
}

/// 40 + 40 + 200 + 40 bytes: with a 100-byte limit, a and b share shard 1,
/// the oversized c gets shard 2 alone, and d starts shard 3.
TensorMap shardedTensors() {
  return {{"a", filled(10, 1)}, {"b", filled(10, 2)}, {"c", filled(50, 3)}, {"d", filled(10, 4)}};
}

const std::string kConfig = "{\"model_type\": \"qwen3\"}\n";

TensorMap loadAll(const std::string &path) {
  Checkpoint ckpt = Checkpoint::open(path);
  TensorMap out;
  for (const std::string &name : ckpt.names())
    out[name] = ckpt.get(name);
  return out;
}

} // namespace

//===----------------------------------------------------------------------===//
// saveHfCheckpoint
//===----------------------------------------------------------------------===//

TEST(HfCheckpoint, SingleFileRoundTrip) {
  TempDir tmp;
  std::string dir = tmp.file("out/nested/model"); // parents are created
  TensorMap tensors{{"x", filled(6, 1)}, {"y", Tensor(DType::BF16, {2, 3})},
                    {"z", Tensor(DType::I64, {4})}};
  saveHfCheckpoint(dir, kConfig, tensors, 1 << 20);
  EXPECT_EQ(listDir(dir), (std::vector<std::string>{"config.json", "model.safetensors"}));
  EXPECT_EQ(listDir(tmp.file("out/nested")), std::vector<std::string>{"model"})
      << "no temporary or old directory remains";
  EXPECT_EQ(readFile(dir + "/config.json"), kConfig);
  expectCheckpointHolds(dir, tensors);
  EXPECT_EQ(SafeTensorsFile::open(dir + "/model.safetensors")->metadata().at("format"), "pt");
}

TEST(HfCheckpoint, ExactlyAtTheLimitStaysOneFile) {
  TempDir tmp;
  TensorMap tensors = shardedTensors(); // 320 bytes
  saveHfCheckpoint(tmp.file("m"), kConfig, tensors, 320);
  EXPECT_EQ(listDir(tmp.file("m")), (std::vector<std::string>{"config.json", "model.safetensors"}));
  expectCheckpointHolds(tmp.file("m"), tensors);
}

TEST(HfCheckpoint, ShardedRoundTrip) {
  TempDir tmp;
  std::string dir = tmp.file("m");
  TensorMap tensors = shardedTensors();
  saveHfCheckpoint(dir, kConfig, tensors, 100);
  const std::string s1 = "model-00001-of-00003.safetensors";
  const std::string s2 = "model-00002-of-00003.safetensors";
  const std::string s3 = "model-00003-of-00003.safetensors";
  EXPECT_EQ(listDir(dir), (std::vector<std::string>{"config.json", s1, s2, s3,
                                                     "model.safetensors.index.json"}));
  EXPECT_EQ(listDir(tmp.path()), std::vector<std::string>{"m"});

  nlohmann::json index = nlohmann::json::parse(readFile(dir + "/model.safetensors.index.json"));
  nlohmann::json expected = {
      {"metadata", {{"total_size", 320}}},
      {"weight_map", {{"a", s1}, {"b", s1}, {"c", s2}, {"d", s3}}}};
  EXPECT_EQ(index, expected);
  EXPECT_EQ(SafeTensorsFile::open(dir + "/" + s1)->names(), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(SafeTensorsFile::open(dir + "/" + s2)->names(), std::vector<std::string>{"c"});
  EXPECT_EQ(SafeTensorsFile::open(dir + "/" + s3)->names(), std::vector<std::string>{"d"});
  expectCheckpointHolds(dir, tensors);
}

TEST(HfCheckpoint, OverwriteSwapsWholeDirectory) {
  TempDir tmp;
  std::string dir = tmp.file("m");
  TensorMap first = shardedTensors();
  saveHfCheckpoint(dir, kConfig, first, 100);
  // A reader of the old checkpoint keeps its mapped bytes across the swap.
  Checkpoint before = Checkpoint::open(dir);

  TensorMap second{{"w", filled(3, 9)}};
  saveHfCheckpoint(dir + "/", "{}", second, 1 << 20); // trailing slash names the same dir
  EXPECT_EQ(listDir(dir), (std::vector<std::string>{"config.json", "model.safetensors"}))
      << "no stale shards or index from the first save";
  EXPECT_EQ(listDir(tmp.path()), std::vector<std::string>{"m"});
  EXPECT_EQ(readFile(dir + "/config.json"), "{}");
  expectCheckpointHolds(dir, second);
  EXPECT_EQ(bytesOf(before.get("c")), bytesOf(first.at("c")));
}

TEST(HfCheckpoint, FailuresNameTheDirectoryAndLeaveNoTemporary) {
  TempDir tmp;
  std::ofstream(tmp.file("plain")) << "x";
  std::string underFile = tmp.file("plain/ckpt");
  expectError([&] { saveHfCheckpoint(underFile, kConfig, shardedTensors(), 100); },
              {underFile, "cannot save checkpoint"});
  expectError([&] { saveHfCheckpoint(tmp.file("plain"), kConfig, {}, 100); },
              {tmp.file("plain"), "not a directory"});
  expectError([&] { saveHfCheckpoint(tmp.file("m"), kConfig, {}, 0); },
              {tmp.file("m"), "must be > 0"});
  EXPECT_EQ(listDir(tmp.path()), std::vector<std::string>{"plain"});
}

//===----------------------------------------------------------------------===//
// diffCheckpoints / formatCheckpointDiff
//===----------------------------------------------------------------------===//

TEST(HfCheckpoint, DiffFixtureAgainstTrainedWeights) {
  std::string a = dataPath("qwen3-dense-tiny/model.safetensors");
  std::string b = dataPath("qwen3-dense-tiny/weights_after_5_steps.safetensors");
  CheckpointDiff diff = diffCheckpoints(a, b);
  EXPECT_TRUE(diff.missing.empty());
  EXPECT_TRUE(diff.unexpected.empty());
  EXPECT_TRUE(diff.mismatched.empty());
  std::vector<std::string> names = Checkpoint::open(a).names();
  ASSERT_EQ(diff.maxAbsDiff.size(), names.size());
  for (const std::string &name : names) {
    double d = diff.maxAbsDiff.at(name);
    EXPECT_TRUE(std::isfinite(d) && d > 0) << name << ": " << d;
  }
  std::string report = formatCheckpointDiff(diff, a, b);
  EXPECT_THAT(report, HasSubstr("missing keys (in A, not in B): 0\n"));
  EXPECT_THAT(report, HasSubstr("unexpected keys (in B, not in A): 0\n"));
  EXPECT_THAT(report, HasSubstr("  model.embed_tokens.weight  max_abs_diff "));
  EXPECT_THAT(report, HasSubstr("max_abs_diff over all tensors: "));
  EXPECT_EQ(report, formatCheckpointDiff(diffCheckpoints(a, b), a, b)) << "deterministic";
}

TEST(HfCheckpoint, DiffReportsMissingUnexpectedAndMismatched) {
  TempDir tmp;
  std::string a = dataPath("qwen3-dense-tiny/model.safetensors");
  TensorMap tensors = loadAll(a);
  const std::string removed = "model.norm.weight";
  const std::string reshaped = "model.embed_tokens.weight";
  const std::string narrowed = "model.layers.0.mlp.up_proj.weight";
  ASSERT_EQ(tensors.erase(removed), 1u);
  tensors["zz.extra"] = filled(4, 0);
  Tensor &r = tensors.at(reshaped);
  r = r.reshaped({r.numel()});
  tensors.at(narrowed) = tensors.at(narrowed).to(DType::BF16);
  std::string b = tmp.file("b");
  saveHfCheckpoint(b, kConfig, tensors, 1 << 16); // sharded B works too

  CheckpointDiff diff = diffCheckpoints(a, b);
  EXPECT_EQ(diff.missing, std::vector<std::string>{removed});
  EXPECT_EQ(diff.unexpected, std::vector<std::string>{"zz.extra"});
  ASSERT_EQ(diff.mismatched.size(), 2u);
  EXPECT_EQ(diff.mismatched[0].first, reshaped);
  EXPECT_THAT(diff.mismatched[0].second, HasSubstr("shape ["));
  EXPECT_EQ(diff.mismatched[1], std::make_pair(narrowed, std::string("dtype F32 vs BF16")));
  EXPECT_EQ(diff.maxAbsDiff.count(reshaped), 0u) << "shapes differ: not compared";
  EXPECT_EQ(diff.maxAbsDiff.count(removed), 0u);
  // Only the BF16 rounding separates the narrowed tensor from the original.
  double d = diff.maxAbsDiff.at(narrowed);
  EXPECT_GT(d, 0);
  EXPECT_LT(d, 1e-2);
  EXPECT_EQ(diff.maxAbsDiff.at("model.layers.0.mlp.down_proj.weight"), 0.0);

  std::string report = formatCheckpointDiff(diff, a, b);
  EXPECT_THAT(report, HasSubstr("missing keys (in A, not in B): 1\n  " + removed + "\n"));
  EXPECT_THAT(report, HasSubstr("unexpected keys (in B, not in A): 1\n  zz.extra\n"));
  EXPECT_THAT(report, HasSubstr("  " + narrowed + ": dtype F32 vs BF16\n"));
}

TEST(HfCheckpoint, FormatIsExactAndPropagatesNaN) {
  CheckpointDiff diff;
  diff.missing = {"gone"};
  diff.mismatched = {{"s", "shape [2] vs [3]"}};
  diff.maxAbsDiff = {{"b", 0.5}, {"a", 1.25e-7}};
  EXPECT_EQ(formatCheckpointDiff(diff, "A.safetensors", "B"),
            "checkpoint diff: A = A.safetensors, B = B\n"
            "missing keys (in A, not in B): 1\n"
            "  gone\n"
            "unexpected keys (in B, not in A): 0\n"
            "shape/dtype mismatches: 1\n"
            "  s: shape [2] vs [3]\n"
            "compared tensors: 2\n"
            "  a  max_abs_diff 1.250e-07\n"
            "  b  max_abs_diff 5.000e-01\n"
            "max_abs_diff over all tensors: 5.000e-01\n");
  diff.maxAbsDiff["c"] = std::numeric_limits<double>::quiet_NaN();
  EXPECT_THAT(formatCheckpointDiff(diff, "A", "B"),
              HasSubstr("max_abs_diff over all tensors: nan\n"));
  EXPECT_THAT(formatCheckpointDiff(CheckpointDiff{}, "A", "B"),
              HasSubstr("max_abs_diff over all tensors: n/a\n"));
}

TEST(HfCheckpoint, DiffTreatsNaNPairsAsEqualAndLoneNaNAsDifferent) {
  TempDir tmp;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  auto make = [](std::vector<float> v) {
    Tensor t(DType::F32, {int64_t(v.size())});
    std::copy(v.begin(), v.end(), t.mutableData<float>());
    return t;
  };
  writeSafeTensors(tmp.file("a.safetensors"),
                   {{"same", make({nan, inf, 1})}, {"lone", make({1, 2})}});
  writeSafeTensors(tmp.file("b.safetensors"),
                   {{"same", make({nan, inf, 1.5})}, {"lone", make({nan, 2})}});
  CheckpointDiff diff = diffCheckpoints(tmp.file("a.safetensors"), tmp.file("b.safetensors"));
  EXPECT_EQ(diff.maxAbsDiff.at("same"), 0.5);
  EXPECT_TRUE(std::isnan(diff.maxAbsDiff.at("lone")));
}

TEST(HfCheckpoint, DiffOfUnreadableCheckpointNamesIt) {
  TempDir tmp;
  std::string missing = tmp.file("nope");
  expectError([&] { diffCheckpoints(dataPath("qwen3-dense-tiny"), missing); }, {missing});
}
