//===- FrontendTest.cpp - Qwen3 configs, naming, capture and costs --------===//

#include "TestUtil.h"
#include "kiln/Dialect/Kiln/IR/KilnOps.h"
#include "kiln/Frontend/Capture.h"
#include "kiln/Frontend/Qwen3Naming.h"
#include "kiln/Planner/ProgramCost.h"
#include "kiln/Runtime/SafeTensors.h"
#include "kiln/Support/Json.h"

#include "mlir/IR/MLIRContext.h"

#include <cmath>

using namespace kiln;
using namespace kiln::test;

namespace {

const Qwen3Config &flavor(const std::string &name) {
  for (const Qwen3Config &c : Qwen3Config::flavors())
    if (c.name == name)
      return c;
  throw std::runtime_error("no flavor " + name);
}

TEST(FrontendTest, FlavorParameterCountsMatchPublishedSizes) {
  // Qwen3 model cards: total and non-embedding parameters, in billions.
  struct Published {
    const char *name;
    double total, nonEmbedding;
  };
  for (Published p : {Published{"qwen3-0.6b", 0.596, 0.44}, Published{"qwen3-1.7b", 1.7, 1.4},
                      Published{"qwen3-4b", 4.0, 3.6}, Published{"qwen3-8b", 8.2, 6.95},
                      Published{"qwen3-14b", 14.8, 13.2}, Published{"qwen3-32b", 32.76, 31.2}}) {
    const Qwen3Config &c = flavor(p.name);
    double total = c.parameterCount() / 1e9;
    double embeddings = (c.tieWordEmbeddings ? 1 : 2) * c.vocabSize * c.hiddenSize / 1e9;
    EXPECT_NEAR(total, p.total, p.total * 0.015) << p.name;
    EXPECT_NEAR(total - embeddings, p.nonEmbedding, p.nonEmbedding * 0.03) << p.name;
  }
}

TEST(FrontendTest, ParameterNamesMatchTheFixtureCheckpoint) {
  Qwen3Config c = Qwen3Config::fromHfDirectory(dataPath("qwen3-dense-tiny"));
  auto file = SafeTensorsFile::open(dataPath("qwen3-dense-tiny/model.safetensors"));
  std::vector<Qwen3Parameter> params = qwen3Parameters(c);
  EXPECT_EQ(params.size(), file->names().size());
  for (const Qwen3Parameter &p : params) {
    ASSERT_TRUE(file->contains(p.hfKey)) << p.hfKey;
    EXPECT_EQ(file->get(p.hfKey).shape(), p.shape) << p.hfKey;
    EXPECT_EQ(torchtitanModuleForHfKey(p.hfKey), p.module);
  }
  EXPECT_EQ(torchtitanModuleForHfKey("model.layers.3.mlp.down_proj.weight"),
            "layers.3.feed_forward.w2");
  EXPECT_EQ(torchtitanModuleForHfKey("model.layers.12.input_layernorm.weight"),
            "layers.12.attention_norm");
  EXPECT_EQ(torchtitanModuleForHfKey("lm_head.weight"), "output");
  EXPECT_EQ(torchtitanModuleForHfKey("model.layers.0.mlp.nonsense.weight"), "");
}

TEST(FrontendTest, ConfigErrorsNameTheFieldAndTheFile) {
  std::string good = readFile(dataPath("qwen3-dense-tiny/config.json"));
  auto with = [&](const std::string &from, const std::string &to) {
    std::string text = good;
    text.replace(text.find(from), from.size(), to);
    return text;
  };
  expectError([&] { Qwen3Config::fromHfJson(with("\"qwen3\"", "\"mistral\""), "c.json"); },
              {"c.json", "model_type 'mistral'", "qwen3", "llama"});
  expectError([&] { Qwen3Config::fromHfJson(with("\"head_dim\"", "\"head_dimension\""), "c.json"); },
              {"c.json", "missing field 'head_dim'"});
  expectError([&] {
    Qwen3Config::fromHfJson(with("\"num_key_value_heads\": 2", "\"num_key_value_heads\": 3"),
                            "c.json");
  }, {"c.json", "num_attention_heads (4)", "num_key_value_heads (3)"});
  expectError([&] { Qwen3Config::fromHfJson(with("\"vocab_size\": 512", "\"vocab_size\": \"512\""), "c.json"); },
              {"c.json", "'vocab_size' must be an integer"});
  expectError([&] { Qwen3Config::fromHfJson(good.substr(0, good.size() / 2), "c.json"); },
              {"c.json", "malformed JSON"});
  expectError([&] { Qwen3Config::resolve("qwen3-7b"); }, {"qwen3-7b", "qwen3-0.6b"});
}

TEST(FrontendTest, CaptureBindsParametersByHfKeyAndCostsMatchTheModel) {
  Qwen3Config c = Qwen3Config::fromHfDirectory(dataPath("qwen3-dense-tiny"));
  mlir::MLIRContext context;
  const int64_t batch = 2, seq = 32;
  auto module = captureQwen3(context, c, {batch, seq});
  auto forward = module->lookupSymbol<mlir::func::FuncOp>("forward");
  auto loss = module->lookupSymbol<mlir::func::FuncOp>("loss");
  ASSERT_TRUE(forward && loss);
  std::vector<Qwen3Parameter> params = qwen3Parameters(c);
  ASSERT_EQ(forward.getNumArguments(), params.size() + 1);
  for (size_t i = 0; i < params.size(); ++i)
    EXPECT_EQ(forward.getArgAttrOfType<mlir::StringAttr>(i + 1, kParamAttr).str(),
              params[i].hfKey);

  ProgramCost cost = programCost(forward);
  EXPECT_EQ(cost.parameterCount, c.parameterCount());
  EXPECT_EQ(cost.opCounts["kiln.linear"], 7 * c.numLayers + 1);
  EXPECT_EQ(cost.opCounts["kiln.attention"], c.numLayers);
  // Matmul FLOPs are 2 per token per matmul parameter; attention adds
  // (4 * head_dim + 5) per causal (query, key) pair per head.
  int64_t linearFlops = 2 * batch * seq * c.matmulParameterCount();
  int64_t attentionFlops =
      c.numLayers * batch * c.numHeads * (seq * (seq + 1) / 2) * (4 * c.headDim + 5);
  double linearOnly = 0;
  forward.walk([&](LinearOp op) { linearOnly += op.getFlops(); });
  EXPECT_EQ(linearOnly, double(linearFlops));
  double attentionOnly = 0;
  forward.walk([&](AttentionOp op) { attentionOnly += op.getFlops(); });
  EXPECT_EQ(attentionOnly, double(attentionFlops));
  EXPECT_GT(cost.flops, double(linearFlops + attentionFlops));
}

// The global step of a large model at a realistic batch: FLOP counts are
// doubles, so neither the capture nor the cost refuses or wraps where int64
// would. Estimates by hand: a forward is 2 FLOPs per matmul parameter a token
// uses, plus causal attention's q.k and p.v, 4 x head_dim per scored pair
// ((seq + 1) / 2 per query): torchtitan's 6 N + 12 L H Q T is the forward
// and backward of full attention, a third of it forward, half of that causal.
double forwardEstimate(double activeMatmulParameters, const Qwen3Config &c, double batch,
                       double seq) {
  double tokens = batch * seq;
  return 2 * activeMatmulParameters * tokens +
         c.numLayers * batch * c.numHeads * (seq * (seq + 1) / 2) * 4 * c.headDim;
}

TEST(FrontendTest, CaptureCostsGlobalStepsBeyondInt64) {
  mlir::MLIRContext context;
  {
    // Qwen3-235B-A22B over 4096 x 4096 tokens (512 ranks x 8 x 4096):
    // 16.8M tokens x 235B parameters x 6 used to be refused as too large.
    const Qwen3Config &c = flavor("qwen3-235b-a22b");
    const int64_t batch = 4096, seq = 4096;
    auto module = captureQwen3(context, c, {batch, seq});
    auto forward = module->lookupSymbol<mlir::func::FuncOp>("forward");
    ASSERT_TRUE(forward);
    // Per layer: q, k, v, o (64 and 4 heads of 128 on 4096), the router
    // (128 experts) and 8 routed experts' gate, up and down (1536); the
    // untied output projection.
    double active = 94 * (4096.0 * (2 * 64 * 128 + 2 * 4 * 128) + 128 * 4096.0 +
                          8 * 3 * 4096.0 * 1536) +
                    151936.0 * 4096;
    EXPECT_EQ(active, double(c.activeMatmulParameterCount()));
    double flops = programCost(forward).flops;
    EXPECT_TRUE(std::isfinite(flops));
    EXPECT_GT(flops, 0);
    EXPECT_NEAR(flops, forwardEstimate(active, c, batch, seq),
                0.01 * forwardEstimate(active, c, batch, seq));
    // The LM head alone: 2 x tokens x hidden x vocab, exactly.
    double head = 0;
    forward.walk([&](LinearOp op) {
      if (op.getFqn() == "output")
        head += op.getFlops();
    });
    EXPECT_EQ(head, 2.0 * batch * seq * 4096 * 151936);
  }
  {
    // Llama 3.1 405B over the same 16.8M tokens: the forward alone, ~1.4e19,
    // passes INT64_MAX (9.2e18).
    const Qwen3Config &c = flavor("llama3.1-405b");
    const int64_t batch = 4096, seq = 4096;
    auto module = captureQwen3(context, c, {batch, seq});
    auto loss = module->lookupSymbol<mlir::func::FuncOp>("loss");
    ASSERT_TRUE(loss);
    // Per layer: q, k, v, o (128 and 8 heads of 128 on 16384) and the MLP
    // (53248); the untied output projection.
    double active = 126 * (16384.0 * (2 * 128 * 128 + 2 * 8 * 128) + 3 * 16384.0 * 53248) +
                    128256.0 * 16384;
    double flops = programCost(loss).flops;
    EXPECT_TRUE(std::isfinite(flops));
    EXPECT_GT(flops, 0x1p63);
    EXPECT_NEAR(flops, forwardEstimate(active, c, batch, seq),
                0.01 * forwardEstimate(active, c, batch, seq));
  }
}

TEST(FrontendTest, CaptureRejectsSequencesBeyondTheModelsPositions) {
  Qwen3Config c = Qwen3Config::fromHfDirectory(dataPath("qwen3-dense-tiny"));
  mlir::MLIRContext context;
  expectError([&] { captureQwen3(context, c, {1, 129}); },
              {"seq 129", "max_position_embeddings 128"});
}

} // namespace

namespace {

TEST(FrontendTest, FailedIrStepsReportEveryDiagnostic) {
  mlir::MLIRContext context;
  loadKilnDialects(context);
  auto loc = mlir::UnknownLoc::get(&context);
  expectError(
      [&] {
        succeedOrFail(context, "building something failed", [&] {
          mlir::emitError(loc) << "first problem";
          mlir::emitError(loc) << "second problem";
          return mlir::failure();
        });
      },
      {"building something failed:", "first problem", "second problem"});
  // A step that succeeds throws nothing, even if it emitted remarks.
  succeedOrFail(context, "unused", [&] {
    mlir::emitRemark(loc) << "fine";
    return mlir::success();
  });
}

TEST(FrontendTest, LlamaFlavorsHaveMetasParameterCounts) {
  // Meta's Llama 3.1 model cards / safetensors indexes: exact totals.
  EXPECT_EQ(flavor("llama3.1-8b").parameterCount(), 8030261248);
  EXPECT_EQ(flavor("llama3.1-70b").parameterCount(), 70553706496);
  // No q_norm / k_norm: two RMSNorm weights per layer and the final one.
  const Qwen3Config &c = flavor("llama3.1-8b");
  int64_t norms = 0;
  for (const Qwen3Parameter &p : qwen3Parameters(c)) {
    EXPECT_EQ(p.hfKey.find("_norm"), std::string::npos) << p.hfKey;
    norms += p.shape.size() == 1;
  }
  EXPECT_EQ(norms, 2 * c.numLayers + 1);
}

TEST(FrontendTest, Llama3RopeScalingFollowsTheHuggingFaceFormula) {
  // Llama 3.1's settings: theta 5e5, head_dim 128, factor 8, low 1, high 4,
  // 8192 original positions. Wavelengths under 8192 / 4 = 2048 keep their
  // frequency, those over 8192 / 1 are divided by 8, and between them the
  // frequency is (1 - s) f / 8 + s f with s = (8192 / wavelength - 1) / (4 - 1).
  Llama3RopeScaling scaling{8, 1, 4, 8192};
  std::vector<float> plain = ropeInverseFrequencies(5e5, 128);
  std::vector<float> scaled = ropeInverseFrequencies(5e5, 128, &scaling);
  ASSERT_EQ(scaled.size(), 64u);
  int kept = 0, stretched = 0, blended = 0;
  for (size_t i = 0; i < 64; ++i) {
    double f = std::pow(5e5, -double(2 * i) / 128), wavelength = 2 * M_PI / f;
    EXPECT_NEAR(plain[i], f, f * 1e-6);
    double expected = f;
    if (wavelength > 8192) {
      expected = f / 8, ++stretched;
    } else if (wavelength >= 2048) {
      double s = (8192 / wavelength - 1) / 3;
      expected = (1 - s) * f / 8 + s * f, ++blended;
    } else {
      ++kept;
    }
    EXPECT_NEAR(scaled[i], expected, expected * 1e-5) << i;
  }
  EXPECT_GT(kept, 0);
  EXPECT_GT(stretched, 0);
  EXPECT_GT(blended, 0);
}

TEST(FrontendTest, LlamaConfigsReadTheirOwnFields) {
  std::string llama = R"({"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 128,
    "vocab_size": 512, "rms_norm_eps": 1e-5, "rope_theta": 500000.0,
    "tie_word_embeddings": false, "max_position_embeddings": 256, "mlp_bias": false,
    "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                     "high_freq_factor": 4.0, "original_max_position_embeddings": 64}})";
  Qwen3Config c = Qwen3Config::fromHfJson(llama, "l.json");
  EXPECT_TRUE(c.llama);
  EXPECT_EQ(c.headDim, 16); // hidden_size / num_attention_heads
  EXPECT_EQ(c.ropeScaling.originalMaxPositionEmbeddings, 64);
  // The HF config written back reads as the same model (overrides go through it).
  Qwen3Config again = c.withOverrides(nlohmann::json{{"num_hidden_layers", 3}}, "l.json");
  EXPECT_TRUE(again.llama);
  EXPECT_EQ(again.numLayers, 3);
  EXPECT_EQ(again.ropeScaling.factor, 8);
  EXPECT_EQ(again.ropeScaling.highFreqFactor, 4);
  auto with = [&](const std::string &from, const std::string &to) {
    std::string text = llama;
    text.replace(text.find(from), from.size(), to);
    return text;
  };
  expectError([&] { Qwen3Config::fromHfJson(with("\"llama3\"", "\"dynamic\""), "l.json"); },
              {"l.json", "'rope_scaling.rope_type' = \"dynamic\" is not supported", "llama3"});
  expectError([&] { Qwen3Config::fromHfJson(with("\"factor\": 8.0", "\"factor\": -1"), "l.json"); },
              {"l.json", "'rope_scaling.factor' must be a finite positive number"});
  expectError([&] { Qwen3Config::fromHfJson(with("\"mlp_bias\": false", "\"mlp_bias\": true"), "l.json"); },
              {"l.json", "'mlp_bias' = true is not supported"});
  expectError([&] {
    Qwen3Config::fromHfJson(with("\"high_freq_factor\": 4.0", "\"high_freq_factor\": 0.5"), "l.json");
  }, {"l.json", "'rope_scaling.high_freq_factor' (0.5) must exceed 'low_freq_factor' (1)"});
  // Qwen3 keeps refusing rope_scaling by name.
  std::string qwen = readFile(dataPath("qwen3-dense-tiny/config.json"));
  qwen.replace(qwen.find("\"rope_scaling\": null"), 20,
               "\"rope_scaling\": {\"rope_type\": \"llama3\"}");
  expectError([&] { Qwen3Config::fromHfJson(qwen, "q.json"); },
              {"q.json", "'rope_scaling'", "not supported", "plain RoPE"});
}

TEST(FrontendTest, TransformersV5ConfigsReadAsTheirV4Originals) {
  // test/data/*-v5/config.json: the fixtures' configs as Transformers v5
  // writes them (rope_parameters, dtype, layer_types for the dense one).
  for (const char *name : {"qwen3-dense-tiny", "qwen3-moe-tiny"}) {
    Qwen3Config v4 = Qwen3Config::fromHfDirectory(dataPath(name));
    Qwen3Config v5 = Qwen3Config::fromHfDirectory(dataPath(std::string(name) + "-v5"));
    EXPECT_EQ(v5.toHfConfigJson(), v4.toHfConfigJson()) << name;
  }
  // Llama 3's scaling in rope_parameters reads as in rope_scaling.
  std::string llama = R"({"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 128,
    "vocab_size": 512, "rms_norm_eps": 1e-5, "tie_word_embeddings": false,
    "max_position_embeddings": 256, "dtype": "bfloat16",
    "rope_parameters": {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0,
      "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 64}})";
  Qwen3Config c = Qwen3Config::fromHfJson(llama, "l.json");
  EXPECT_EQ(c.ropeTheta, 5e5);
  EXPECT_EQ(c.ropeScaling.factor, 8);
  EXPECT_EQ(c.ropeScaling.lowFreqFactor, 1);
  EXPECT_EQ(c.ropeScaling.highFreqFactor, 4);
  EXPECT_EQ(c.ropeScaling.originalMaxPositionEmbeddings, 64);
  auto replaced = [](std::string text, const std::string &from, const std::string &to) {
    text.replace(text.find(from), from.size(), to);
    return text;
  };
  expectError([&] { Qwen3Config::fromHfJson(replaced(llama, "\"factor\": 8.0,", ""), "l.json"); },
              {"l.json", "'rope_parameters' lacks 'factor', which rope_type \"llama3\" needs"});
  expectError([&] { Qwen3Config::fromHfJson(replaced(llama, "\"llama3\"", "\"yarn\""), "l.json"); },
              {"l.json", "'rope_parameters.rope_type' = \"yarn\" is not supported", "llama3"});
  // v4's rope_scaling beside v5's rope_parameters: the same scaling, or an error.
  std::string both = replaced(llama, "\"dtype\"", R"("rope_scaling": {"type": "llama3", "factor": 8,
    "low_freq_factor": 1, "high_freq_factor": 4, "original_max_position_embeddings": 64}, "dtype")");
  EXPECT_EQ(Qwen3Config::fromHfJson(both, "l.json").ropeScaling.factor, 8);
  expectError([&] { Qwen3Config::fromHfJson(replaced(both, "\"factor\": 8,", "\"factor\": 4,"), "l.json"); },
              {"l.json", "'rope_scaling.factor' = 4 and 'rope_parameters.factor' = 8.0 disagree"});
  expectError([&] { Qwen3Config::fromHfJson(replaced(llama, "\"dtype\"", R"("rope_scaling": 8, "dtype")"), "l.json"); },
              {"l.json", "'rope_scaling' must be null or an object, got 8"});
}

TEST(FrontendTest, TransformersV5ConfigErrorsNameTheFields) {
  std::string v5 = readFile(dataPath("qwen3-dense-tiny-v5/config.json"));
  auto with = [&](const std::string &from, const std::string &to) {
    std::string text = v5;
    size_t at = text.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    text.replace(at, from.size(), to);
    return text;
  };
  auto read = [](const std::string &text) { Qwen3Config::fromHfJson(text, "c.json"); };
  const std::string rope = R"("rope_parameters": {
    "rope_theta": 1000000.0,
    "rope_type": "default"
  })";
  // Stated in both forms: they must agree.
  read(with(rope, rope + R"(, "rope_theta": 1e6, "rope_scaling": null, "torch_dtype": "float32")"));
  expectError([&] { read(with(rope, rope + R"(, "rope_theta": 10000.0)")); },
              {"c.json", "'rope_theta' = 10000.0 and 'rope_parameters.rope_theta' = 1000000.0 "
                         "disagree"});
  expectError([&] { read(with(rope, rope + R"(, "torch_dtype": "bfloat16")")); },
              {"c.json", "'torch_dtype' = \"bfloat16\" and 'dtype' = \"float32\" disagree"});
  // Neither form.
  expectError([&] { read(with(rope, R"("rope_parameters": {"rope_type": "default"})")); },
              {"c.json", "missing field 'rope_theta'", "'rope_parameters.rope_theta'"});
  expectError([&] { read(with(rope, R"("rope_parameters": [1000000.0])")); },
              {"c.json", "'rope_parameters' must be null or an object"});
  expectError([&] { read(with("\"rope_theta\": 1000000.0", "\"rope_theta\": -1")); },
              {"c.json", "'rope_parameters.rope_theta' must be a finite positive number"});
  // RoPE variants Kiln does not build, by name.
  expectError([&] { read(with("\"default\"", "\"yarn\"")); },
              {"c.json", "'rope_parameters.rope_type' = \"yarn\" is not supported",
               "plain RoPE (\"default\") for Qwen3"});
  expectError([&] { read(with(rope, R"("rope_parameters": {"type": "linear", "rope_theta": 1e6})")); },
              {"c.json", "'rope_parameters.type' = \"linear\" is not supported"});
  expectError([&] {
    read(with("\"rope_type\": \"default\"", R"("rope_type": "default", "partial_rotary_factor": 0.5)"));
  }, {"c.json", "'rope_parameters.partial_rotary_factor' = 0.5 is not supported"});
  // One dict per layer type: the full-attention one is read.
  std::string perType = with(rope, R"("rope_parameters": {"full_attention":
    {"rope_type": "default", "rope_theta": 1000000.0}})");
  EXPECT_EQ(Qwen3Config::fromHfJson(perType, "c.json").ropeTheta, 1e6);
  expectError([&] { read(with(rope, R"("rope_parameters": {"full_attention": 1e6})")); },
              {"c.json", "'rope_parameters.full_attention' must be an object, got 1000000.0"});
  expectError([&] {
    read(with(rope, R"("rope_parameters": {"sliding_attention": {"rope_theta": 1e4}})"));
  }, {"c.json", "'rope_parameters' has no 'full_attention' entry"});
  expectError([&] {
    read(with(rope, R"("rope_parameters": {"full_attention": {"rope_theta": 1e6}, "rope_theta": 1e6})"));
  }, {"c.json", "per-layer-type entries and 'rope_theta'"});
  // layer_types: full attention on every layer, and one entry per layer.
  expectError([&] {
    read(with(R"("full_attention",
    "full_attention",
    "full_attention")", R"("full_attention", "sliding_attention", "full_attention")"));
  }, {"c.json", "'layer_types[1]' = \"sliding_attention\" is not supported",
      "full causal attention"});
  expectError([&] {
    read(with(R"("full_attention",
    "full_attention",
    "full_attention")", R"("full_attention")"));
  }, {"c.json", "'layer_types' has 1 entries but 'num_hidden_layers' is 3"});
  expectError([&] { read(with("\"layer_types\": [", "\"layer_types\": \"full_attention\", \"x\": [")); },
              {"c.json", "'layer_types' must be an array"});
}

} // namespace
