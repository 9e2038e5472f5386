//===- FixtureTest.cpp - Eager evaluation vs Hugging Face Transformers ----===//
//
// The shared fixture qwen3-dense-tiny was computed by Transformers'
// Qwen3ForCausalLM in float32 (see test/data/qwen3-dense-tiny/expected.json).
// Kiln captures the model, binds the checkpoint by HF key and interprets the
// IR; loss and logits must agree within 1e-5 (the reference's own
// float32-vs-float64 spread is 2e-7).
//
//===----------------------------------------------------------------------===//

#include "TestUtil.h"
#include "kiln/Driver/Evaluate.h"
#include "kiln/Runtime/SafeTensors.h"
#include "kiln/Runtime/TokenBatch.h"
#include "kiln/Support/Json.h"

#include <filesystem>

using namespace kiln;
using namespace kiln::test;

namespace {

const std::string kFixture = dataPath("qwen3-dense-tiny");

nlohmann::json expected() {
  return parseJson(readFile(kFixture + "/expected.json"), "expected.json");
}

Tensor fixtureTokens() { return readTokenBatch(kFixture + "/tokens.json"); }

/// tokens[:, :-1]
Tensor dropLast(const Tensor &tokens) {
  int64_t b = tokens.dim(0), n = tokens.dim(1) - 1;
  Tensor out(DType::I64, {b, n});
  for (int64_t r = 0; r < b; ++r)
    std::copy_n(tokens.data<int64_t>() + r * (n + 1), n, out.mutableData<int64_t>() + r * n);
  return out;
}

TEST(FixtureTest, Float32LossMatchesTransformers) {
  double want = expected()["steps"][0]["loss_before_update"].get<double>();
  EXPECT_NEAR(evaluateLoss(kFixture, fixtureTokens()), want, 1e-5);
}

TEST(FixtureTest, Bf16CheckpointLossMatchesTransformers) {
  // A model directory whose only weights are the BF16 file.
  auto dir = std::filesystem::temp_directory_path() / ("kiln-bf16-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  std::filesystem::copy_file(kFixture + "/config.json", dir / "config.json");
  std::filesystem::copy_file(kFixture + "/model_bf16.safetensors", dir / "model.safetensors");
  double want = expected()["loss_step0_from_bf16_checkpoint_upcast_to_float32"].get<double>();
  float got = evaluateLoss(dir.string(), fixtureTokens());
  std::filesystem::remove_all(dir);
  EXPECT_NEAR(got, want, 1e-5);
}

TEST(FixtureTest, LogitsMatchTransformers) {
  Tensor logits = evaluateLogits(kFixture, dropLast(fixtureTokens()));
  Tensor want = SafeTensorsFile::open(kFixture + "/logits_step0.safetensors")->get("logits");
  ASSERT_EQ(logits.shape(), want.shape());
  EXPECT_LT(maxAbsDiff(toDoubles(logits), toDoubles(want)), 1e-5);
}

TEST(FixtureTest, ShapeMismatchBetweenConfigAndCheckpointIsAnError) {
  auto dir = std::filesystem::temp_directory_path() / ("kiln-lying-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  std::string config = readFile(kFixture + "/config.json");
  config.replace(config.find("\"intermediate_size\": 128"), 24, "\"intermediate_size\": 96");
  writeFileAtomic((dir / "config.json").string(), config);
  std::filesystem::copy_file(kFixture + "/model.safetensors", dir / "model.safetensors");
  expectError([&] { evaluateLoss(dir.string(), fixtureTokens()); },
              {"model.layers.0.mlp.gate_proj.weight", "[128, 64]", "[96, 64]"});
  std::filesystem::remove_all(dir);
}

} // namespace
