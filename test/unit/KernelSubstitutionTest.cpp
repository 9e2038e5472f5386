//===- KernelSubstitutionTest.cpp - Training with substituted kernels -----===//
//
// Override rules change how the step is computed, never what: training the
// shared fixtures with every kernel substituted matches Hugging Face
// Transformers as closely as training without (losses and grad norms 1e-5,
// step-1 gradients 1e-6, weights after 5 steps 1e-5), the memory plan still
// predicts the executor's peak exactly, and the fused loss saves no logits.
//
//===----------------------------------------------------------------------===//

#include "TestUtil.h"
#include "kiln/Config/OverrideRules.h"
#include "kiln/CustomKernels/Registry.h"
#include "kiln/Dialect/Kiln/IR/KernelSpec.h"
#include "kiln/Driver/HloKernelCall.h"
#include "kiln/Driver/Training.h"
#include "kiln/Planner/MemoryPlan.h"
#include "kiln/Runtime/TokenBatch.h"
#include "kiln/Support/Json.h"

#include "mlir/IR/BuiltinOps.h"

#include <set>

using namespace kiln;
using namespace kiln::test;

namespace {

/// Every kernel a dense model has a node for, on the CPU target.
const std::string kDenseRules = R"([
  {"name": "rope", "target": "kiln.rope", "kernel": "nki_rope"},
  {"name": "flash", "target": "kiln.attention", "kernel": "nki_flash_attention", "exact": true},
  {"name": "norm", "target": "kiln.rms_norm", "kernel": "nki_rms_norm"},
  {"name": "loss", "target": "kiln.cross_entropy", "kernel": "chunked_cross_entropy",
   "options": {"chunk_rows": 7}}])";

TrainConfig fixtureConfig(const std::string &fixture, std::vector<std::string> extra) {
  std::vector<std::string> args = {
      "--model.hf_path=" + fixture, "--checkpoint.initial_load_path=" + fixture,
      "--checkpoint.initial_load_in_hf=true", "--data.tokens_file=" + fixture + "/tokens.json",
      "--training.steps=5", "--training.max_norm=1.0", "--optimizer.lr=0.0008",
      "--optimizer.betas=[0.9,0.95]", "--optimizer.eps=1e-8", "--optimizer.weight_decay=0.1",
      "--lr_scheduler.warmup_steps=0", "--lr_scheduler.decay_ratio=0", "--target.name=cpu"};
  args.insert(args.end(), extra.begin(), extra.end());
  return TrainConfig::load("", args);
}

int64_t countKernelCalls(mlir::ModuleOp module, llvm::StringRef kernel) {
  int64_t n = 0;
  module.walk([&](mlir::Operation *op) {
    auto name = op->getAttrOfType<mlir::StringAttr>("kernel");
    n += name && name.getValue() == kernel;
  });
  return n;
}

TEST(KernelSubstitutionTest, DenseFixtureTrainsAsTransformersWithEveryKernel) {
  const std::string fixture = dataPath("qwen3-dense-tiny");
  Trainer trainer(fixtureConfig(fixture, {"--override.rules=" + kDenseRules}));
  mlir::ModuleOp module = trainer.module();
  // One forward call per layer in each of @forward and @loss... and in the
  // step: every kernel is really there, forward and backward.
  for (const char *kernel : {"nki_rope", "nki_flash_attention", "nki_rms_norm"})
    EXPECT_GT(countKernelCalls(module, kernel), 0) << kernel;
  EXPECT_GT(countKernelCalls(module, "chunked_cross_entropy"), 0);

  Tensor tokens = readTokenBatch(fixture + "/tokens.json");
  auto grads = SafeTensorsFile::open(fixture + "/grads_step0.safetensors");
  EXPECT_LT(maxDiff(trainer.gradients(tokens), *grads), 1e-6);

  nlohmann::json steps = parseJson(readFile(fixture + "/expected.json"), "expected.json")["steps"];
  for (int k = 0; k < 5; ++k) {
    StepMetrics m = trainer.step(tokens);
    EXPECT_NEAR(m.loss, steps[k]["loss_before_update"].get<double>(), 1e-5) << "step " << k;
    EXPECT_NEAR(m.gradNorm, steps[k]["grad_norm_before_clipping"].get<double>(), 1e-5)
        << "step " << k;
  }
  auto want = SafeTensorsFile::open(fixture + "/weights_after_5_steps.safetensors");
  EXPECT_LT(maxDiff(trainer.parameters(), *want), 1e-5);
}

TEST(KernelSubstitutionTest, FusedLossSavesNoLogitsAndThePlanStaysExact) {
  // 4 x 32 tokens through the fixture's model (hidden 64, vocab 512).
  const std::string fixture = dataPath("qwen3-dense-tiny");
  std::vector<std::string> shape = {"--data.tokens_file=", "--training.local_batch_size=4",
                                    "--training.seq_len=32"};
  std::vector<std::string> withRule = shape;
  withRule.push_back(R"(--override.rules=[{"name": "loss", "target": "kiln.cross_entropy",
                                           "kernel": "chunked_cross_entropy"}])");
  Trainer plain(fixtureConfig(fixture, shape)), fused(fixtureConfig(fixture, withRule));
  auto stepOf = [](Trainer &t) { return t.module().lookupSymbol<mlir::func::FuncOp>("train_step"); };
  MemoryPlan before = planMemory(stepOf(plain)), after = planMemory(stepOf(fused));
  // Saved before: the logits [128, 512] and the projection's input h
  // [128, 64]; after: dL/dW [512, 64] and dL/dh [128, 64].
  const int64_t tokens = 128, vocab = 512, hidden = 64;
  EXPECT_EQ(before.savedActivationBytes - after.savedActivationBytes,
            (tokens * vocab + tokens * hidden - vocab * hidden - tokens * hidden) * 4);
  EXPECT_LT(after.peakBytes, before.peakBytes);
  Tensor batch(DType::I64, {4, 33});
  for (int64_t i = 0; i < batch.numel(); ++i)
    batch.mutableData<int64_t>()[i] = (i * 7919) % vocab;
  StepMetrics a = plain.step(batch), b = fused.step(batch);
  EXPECT_EQ(after.peakBytes, b.memLivePeakBytes);
  EXPECT_EQ(before.peakBytes, a.memLivePeakBytes);
  EXPECT_NEAR(a.loss, b.loss, 1e-5);
  EXPECT_NEAR(a.gradNorm, b.gradNorm, 1e-5);
}

TEST(KernelSubstitutionTest, MoeFixtureTrainsAsTransformersWithGroupedExperts) {
  const std::string fixture = dataPath("qwen3-moe-tiny");
  std::string rules = R"([{"name": "experts", "target": "kiln.grouped_experts",
                           "kernel": "nki_grouped_experts"},
                          {"name": "rope", "target": "kiln.rope", "kernel": "nki_rope"}])";
  Trainer trainer(fixtureConfig(fixture, {"--override.rules=" + rules}));
  EXPECT_GT(countKernelCalls(trainer.module(), "nki_grouped_experts"), 0);
  Tensor tokens = readTokenBatch(fixture + "/tokens.json");
  auto grads = SafeTensorsFile::open(fixture + "/grads_step0.safetensors");
  EXPECT_LT(maxDiff(trainer.gradients(tokens), *grads), 1e-6);
  std::vector<nlohmann::json> steps;
  for (const nlohmann::json &record :
       parseJson(readFile(fixture + "/expected.json"), "expected.json"))
    if (record["event"] == "step")
      steps.push_back(record);
  ASSERT_EQ(steps.size(), 6u);
  for (int k = 0; k < 5; ++k) {
    StepMetrics m = trainer.step(tokens);
    EXPECT_NEAR(m.loss, steps[k]["loss"].get<double>(), 1e-5) << "step " << k;
    EXPECT_NEAR(m.gradNorm, steps[k]["grad_norm"].get<double>(), 1e-5) << "step " << k;
  }
}

} // namespace

namespace {

// The issue's target: a 4-layer Qwen3 with hidden 256 and Qwen3's vocabulary
// (42M parameters), batch 4 x seq 256, planned at 1,825 MB of live peak
// without the fused loss; with it, at most 900 MB.
TEST(KernelSubstitutionTest, FusedLossHalvesThePlanOfASmallModelWithTheFullVocabulary) {
  TrainConfig config = TrainConfig::load(
      "", {"--model.hf_path=" + dataPath("../../configs/qwen3-tiny"), "--model.hidden_size=256",
           "--model.intermediate_size=768", "--model.head_dim=64", "--target.name=cpu"});
  Qwen3Config model = config.model.resolve();
  ASSERT_EQ(model.vocabSize, 151936);
  std::unique_ptr<KilnPipelineOptions> fusedOptions = pipelineOptions(config, model, nullptr);
  fusedOptions->log = false;
  fusedOptions->inlineRules = parseOverrideRules(
      nlohmann::json::parse(R"([{"name": "loss", "target": "kiln.cross_entropy",
                                 "kernel": "chunked_cross_entropy"}])"),
      "test");
  mlir::MLIRContext plainContext, fusedContext;
  auto plain = captureTrainingStep(plainContext, model, {4, 256}, KilnPipelineOptions());
  auto fused = captureTrainingStep(fusedContext, model, {4, 256}, *fusedOptions);
  MemoryPlan before = planMemory(plain->lookupSymbol<mlir::func::FuncOp>("train_step"));
  MemoryPlan after = planMemory(fused->lookupSymbol<mlir::func::FuncOp>("train_step"));
  EXPECT_NEAR(before.peakBytes / 1e6, 1825, 1);
  EXPECT_LE(after.peakBytes, 900e6);
  // Saved: logits [1024, V] and the projection's input [1024, 256] give way
  // to dL/dW [V, 256] and dL/dh [1024, 256].
  const int64_t tokens = 1024, vocab = 151936, hidden = 256;
  EXPECT_EQ(before.savedActivationBytes - after.savedActivationBytes,
            (tokens * vocab - vocab * hidden) * 4);
}

} // namespace

// A binding passes every Kiln operand exactly once and at most one output
// buffer per result (the HLO call aliases each result to its buffer), and
// cites the nki-library release its signature was read from.
TEST(NkiBindingTest, EveryBindingFeedsEachOperandOnceAndOneBufferPerResult) {
  registerCustomKernels();
  int bindings = 0;
  for (const KernelSpec *spec : registeredKernelSpecs()) {
    std::optional<NeuronKernel> neuron = spec->neuron();
    if (!neuron)
      continue;
    for (bool backward : {false, true}) {
      const NkiBinding *binding = neuron->binding(backward);
      if (!binding)
        continue;
      ++bindings;
      SCOPED_TRACE(spec->name().str() + (backward ? " backward" : " forward"));
      std::set<unsigned> operands, buffers, routed;
      for (const NkiArgument &a : binding->arguments) {
        std::set<unsigned> &seen = a.source == NkiArgument::Source::Operand  ? operands
                                   : a.source == NkiArgument::Source::Routed ? routed
                                                                             : buffers;
        EXPECT_TRUE(seen.insert(a.index).second) << a.name << " repeats index " << a.index;
      }
      // The blockwise MoE form: each routed tensor once, built from the
      // routing's operands (which no Operand argument feeds besides).
      if (const std::optional<NkiBlockRouting> &r = binding->routing) {
        for (NkiRoutedTensor t : {NkiRoutedTensor::Hidden, NkiRoutedTensor::Affinities,
                                  NkiRoutedTensor::GateUpWeights, NkiRoutedTensor::DownWeights,
                                  NkiRoutedTensor::TokenPositions, NkiRoutedTensor::BlockExperts})
          EXPECT_EQ(routed.count(unsigned(t)), 1u) << wordOf(t);
        EXPECT_LE(*routed.rbegin(), ClosedSet<NkiRoutedTensor>::words.size() - 1);
        for (unsigned i : r->operands())
          EXPECT_TRUE(operands.insert(i).second) << "routing operand " << i;
      } else {
        EXPECT_TRUE(routed.empty());
      }
      // Operands 0..n-1, each once: kilnOperandPositions inverts them.
      ASSERT_FALSE(operands.empty());
      EXPECT_EQ(*operands.rbegin() + 1, operands.size());
      EXPECT_EQ(kilnOperandPositions(*binding, unsigned(operands.size())).size(), operands.size());
      EXPECT_TRUE(kilnOperandPositions(*binding, unsigned(operands.size()) + 1).empty());
      EXPECT_EQ(binding->source.rfind("aws-neuron/nki-library @ ", 0), 0u) << binding->source;
      EXPECT_EQ(binding->qualifiedName(), binding->module + "." + binding->function);
    }
  }
  EXPECT_GE(bindings, 2); // nki_rope's two directions at least
}

// nki_rope calls rope_hf(q, k, q_out, k_out, cos=None, sin=None,
// rope_cache=None, backward=False) (nki-library @ d2ad3a57,
// core/embeddings/rope_hf.py) with the packed cache: the custom call's
// operands are q, k, the two buffers, the cache; Kiln's (q, k, cache) sit at
// 0, 1 and 4.
TEST(NkiBindingTest, RopeIsRopeHfInItsSignatureOrder) {
  registerCustomKernels();
  std::optional<NeuronKernel> neuron = lookupKernelSpec("nki_rope")->neuron();
  ASSERT_TRUE(neuron);
  for (bool backward : {false, true}) {
    const NkiBinding *binding = neuron->binding(backward);
    ASSERT_NE(binding, nullptr);
    EXPECT_EQ(binding->qualifiedName(), "nkilib.core.embeddings.rope_hf.rope_hf");
    std::vector<std::string> names;
    for (const NkiArgument &a : binding->arguments)
      names.push_back(a.name);
    EXPECT_EQ(names, (std::vector<std::string>{"q", "k", "q_out", "k_out", "rope_cache"}));
    for (unsigned result : {0u, 1u}) { // q_out and k_out are the results' buffers
      const NkiArgument &buffer = binding->arguments[2 + result];
      EXPECT_EQ(buffer.source, NkiArgument::Source::OutputBuffer);
      EXPECT_EQ(buffer.index, result);
    }
    EXPECT_EQ(kilnOperandPositions(*binding, 3), (std::vector<int64_t>{0, 1, 4}));
    ASSERT_EQ(binding->keywords.size(), 1u);
    EXPECT_EQ(binding->keywords[0].name, "backward");
    EXPECT_EQ(std::get<bool>(binding->keywords[0].value), backward);
  }
}

// The layouts a binding declares: the shape the function sees, the row
// statistic's tiles (row g * 128 + p at [p, g], as nkilib's attention
// kernels document their statistics), and the evaluator's way back.
TEST(NkiBindingTest, LayoutsTileRowStatisticsAndFoldHeadsIntoTheBatch) {
  NkiTensorLayout kFolded{{0, 1, 3, 2}, false, true}, stats{{}, true, true};
  EXPECT_EQ(kFolded.apply({2, 3, 256, 8}), (std::vector<int64_t>{6, 8, 256}));
  EXPECT_EQ(stats.apply({2, 3, 256}), (std::vector<int64_t>{6, 128, 2}));
  EXPECT_TRUE(stats.apply({2, 3, 200}).empty()); // not whole tiles

  Tensor lse(DType::F32, {1, 2, 256});
  for (int64_t i = 0; i < lse.numel(); ++i)
    lse.mutableData<float>()[i] = float(i);
  Tensor tiles = HloKernelCall::toNkiLayout(lse, stats);
  ASSERT_EQ(tiles.shape(), (Shape{2, 128, 2}));
  const float *t = tiles.data<float>();
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t p = 0; p < 128; ++p)
      for (int64_t g = 0; g < 2; ++g)
        ASSERT_EQ(t[(h * 128 + p) * 2 + g], float(h * 256 + g * 128 + p)) << h << " " << p;
  Tensor back = HloKernelCall::fromNkiLayout(tiles, stats, {1, 2, 256});
  ASSERT_EQ(back.shape(), lse.shape());
  for (int64_t i = 0; i < lse.numel(); ++i)
    ASSERT_EQ(back.data<float>()[i], float(i));

  Tensor k(DType::F32, {2, 3, 4, 5});
  for (int64_t i = 0; i < k.numel(); ++i)
    k.mutableData<float>()[i] = float(i);
  Tensor laid = HloKernelCall::toNkiLayout(k, kFolded);
  ASSERT_EQ(laid.shape(), (Shape{6, 5, 4}));
  // [b, h, s, d] -> [b*h, d, s]: element (b, h, s, d) at ((b*3 + h), d, s).
  EXPECT_EQ(laid.data<float>()[((1 * 3 + 2) * 5 + 3) * 4 + 1],
            float(((1 * 3 + 2) * 4 + 1) * 5 + 3));
  Tensor kBack = HloKernelCall::fromNkiLayout(laid, kFolded, {2, 3, 4, 5});
  for (int64_t i = 0; i < k.numel(); ++i)
    ASSERT_EQ(kBack.data<float>()[i], float(i));
}

// A module's NKI binding is input (kiln check-hlo reads any module): a
// layout that does not fit its tensor, or a call without the operands its
// binding lists, is an error naming the call, never an out-of-bounds move.
TEST(NkiBindingTest, AnEditedBindingIsRefusedByName) {
  registerCustomKernels();
  mlir::MLIRContext context;
  auto config = [](const std::string &argument) {
    return R"({"kiln_kernel": "nki_rope", "kiln_direction": "forward", "kiln_options": "{}",
               "nki": {"arguments": [)" +
           argument + "]}}";
  };
  expectError(
      [&] {
        HloKernelCall::parse("custom-call.7",
                             config(R"({"name": "q", "kiln_operand": 0, "kiln_shape": [1, 2, 4, 8],
                                        "layout": {"permutation": [0, 1, 7, 2]}})"),
                             context);
      },
      {"custom-call.7 backend_config nki", "argument q's permutation is not one of its 4 "
                                           "dimensions"});
  expectError(
      [&] {
        HloKernelCall::parse("custom-call.8",
                             config(R"({"name": "lse", "kiln_operand": 0, "kiln_shape": [1, 2, 100],
                                        "layout": {"lse_tiles": true}})"),
                             context);
      },
      {"custom-call.8", "argument lse's layout does not fit its Kiln shape [1, 2, 100]"});
  expectError(
      [&] {
        HloKernelCall::parse("custom-call.9", config(R"({"name": "q", "kiln_operand": "zero"})"),
                             context);
      },
      {"custom-call.9 backend_config nki"});
  // What the kernelcall fuzz target found: JSON of the wrong kind, a float
  // where an integer goes.
  expectError([&] { HloKernelCall::parse("custom-call.11", "9", context); },
              {"custom-call.11 backend_config is not a JSON object"});
  expectError([&] { HloKernelCall::parse("custom-call.12", R"({"kiln_kernel": 5})", context); },
              {"custom-call.12 backend_config"});
  expectError(
      [&] {
        HloKernelCall::parse("custom-call.13",
                             config(R"({"name": "q", "kiln_operand": 0, "kiln_shape": [1.28e40]})"),
                             context);
      },
      {"custom-call.13 backend_config nki argument q kiln_shape holds 1.28e+40, not an integer"});
  HloKernelCall call = HloKernelCall::parse(
      "custom-call.10",
      config(R"({"name": "q", "kiln_operand": 0, "kiln_shape": [1, 2, 4, 8], "layout": {}},
                {"name": "k", "kiln_operand": 1, "kiln_shape": [1, 1, 4, 8], "layout": {}})"),
      context);
  expectError(
      [&] {
        call.run({Tensor(DType::F32, {1, 2, 4, 8})});
      },
      {"custom-call.10: the call has 1 operands, its NKI binding 2 arguments"});
  expectError(
      [&] {
        call.run({Tensor(DType::F32, {1, 2, 4, 8}), Tensor(DType::F32, {1, 2, 4, 8})});
      },
      {"custom-call.10: operand 1 is [1, 2, 4, 8], its NKI binding lays out [1, 1, 4, 8]"});
}
