//===- FusedExpertsTest.cpp - Transformers v5's fused expert tensors ------===//

#include "TestUtil.h"
#include "kiln/Runtime/SafeTensors.h"
#include "kiln/Support/Json.h"

#include <cstring>

using namespace kiln;
using namespace kiln::test;

namespace {

/// An F32 tensor whose element i is `base + i`.
Tensor iota(Shape shape, float base) {
  Tensor t(DType::F32, std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i)
    t.mutableData<float>()[i] = base + float(i);
  return t;
}

bool sameBytes(const Tensor &a, const Tensor &b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         std::memcmp(a.rawData(), b.rawData(), a.nbytes()) == 0;
}

TEST(FusedExperts, TheV5MoeFixtureReadsAsItsPerExpertOriginal) {
  // test/data/qwen3-moe-tiny-v5/model.safetensors was fused from the v4
  // fixture by fuse_experts.py (bytes only, no Kiln code).
  Checkpoint v4 = Checkpoint::open(dataPath("qwen3-moe-tiny"));
  Checkpoint v5 = Checkpoint::open(dataPath("qwen3-moe-tiny-v5"));
  ASSERT_EQ(v5.names(), v4.names());
  for (const std::string &name : v4.names())
    EXPECT_TRUE(sameBytes(v5.get(name), v4.get(name))) << name;
  EXPECT_TRUE(v5.contains("model.layers.1.mlp.experts.3.down_proj.weight"));
  // The fused keys themselves are not the checkpoint's names.
  EXPECT_FALSE(v5.contains("model.layers.0.mlp.experts.gate_up_proj"));
}

TEST(FusedExperts, MembersAreTheDocumentedBlocks) {
  // 3 experts, I = 2, H = 4: expert e's gate rows, then its up rows.
  TempDir tmp;
  Tensor gateUp = iota({3, 4, 4}, 0), down = iota({3, 4, 2}, 1000);
  writeSafeTensors(tmp.file("model.safetensors"),
                   {{"model.layers.0.mlp.experts.gate_up_proj", gateUp},
                    {"model.layers.0.mlp.experts.down_proj", down},
                    {"model.norm.weight", iota({4}, 7)}});
  Checkpoint ckpt = Checkpoint::open(tmp.path());
  EXPECT_EQ(ckpt.names().size(), 3u * 3 + 1);
  Tensor up1 = ckpt.get("model.layers.0.mlp.experts.1.up_proj.weight");
  EXPECT_EQ(up1.shape(), (Shape{2, 4}));
  EXPECT_EQ(up1.data<float>()[0], 16 + 8); // [1, 2, 0] of [3, 4, 4]
  Tensor gate2 = ckpt.get("model.layers.0.mlp.experts.2.gate_proj.weight");
  EXPECT_EQ(gate2.data<float>()[7], 32 + 7);
  Tensor down2 = ckpt.get("model.layers.0.mlp.experts.2.down_proj.weight");
  EXPECT_EQ(down2.shape(), (Shape{4, 2}));
  EXPECT_EQ(down2.data<float>()[0], 1000 + 16);
}

TEST(FusedExperts, APairSplitOverShardsReads) {
  TempDir tmp;
  const std::string gateUpKey = "model.layers.0.mlp.experts.gate_up_proj",
                    downKey = "model.layers.0.mlp.experts.down_proj";
  Tensor gateUp = iota({2, 4, 3}, 0), down = iota({2, 3, 2}, 100);
  writeSafeTensors(tmp.file("model-00001-of-00002.safetensors"), {{gateUpKey, gateUp}});
  writeSafeTensors(tmp.file("model-00002-of-00002.safetensors"), {{downKey, down}});
  writeFileAtomic(tmp.file("model.safetensors.index.json"),
            R"({"weight_map": {")" + gateUpKey + R"(": "model-00001-of-00002.safetensors", ")" +
                downKey + R"(": "model-00002-of-00002.safetensors"}})");
  Checkpoint ckpt = Checkpoint::open(tmp.path());
  EXPECT_EQ(ckpt.names().size(), 6u);
  EXPECT_EQ(ckpt.get("model.layers.0.mlp.experts.1.down_proj.weight").data<float>()[5], 111);
  EXPECT_EQ(ckpt.get("model.layers.0.mlp.experts.1.gate_proj.weight").data<float>()[0], 12);
}

TEST(FusedExperts, BadLayoutsNameTheKeys) {
  TempDir tmp;
  std::string file = tmp.path() + ":"; // the checkpoint named, with the keys
  const std::string prefix = "model.layers.0.mlp.experts.";
  auto open = [&](const TensorMap &tensors) {
    writeSafeTensors(tmp.file("model.safetensors"), tensors);
    Checkpoint::open(tmp.path());
  };
  // Both layouts in one checkpoint.
  expectError([&] {
    open({{prefix + "gate_up_proj", iota({2, 4, 4}, 0)}, {prefix + "down_proj", iota({2, 4, 2}, 0)},
          {"model.layers.1.mlp.experts.0.gate_proj.weight", iota({2, 4}, 0)}});
  }, {file, "'" + prefix + "gate_up_proj'", "'model.layers.1.mlp.experts.0.gate_proj.weight'",
      "one way"});
  // Half a pair.
  expectError([&] { open({{prefix + "gate_up_proj", iota({2, 4, 4}, 0)}}); },
              {file, "'" + prefix + "gate_up_proj' has no '" + prefix + "down_proj'"});
  expectError([&] { open({{prefix + "down_proj", iota({2, 4, 2}, 0)}}); },
              {file, "'" + prefix + "down_proj' has no '" + prefix + "gate_up_proj'"});
  // Shapes that do not fit [E, 2I, H] and [E, H, I].
  for (auto [gateUp, down] : {std::pair<Shape, Shape>{{2, 4, 4}, {3, 4, 2}},
                              {{2, 4, 4}, {2, 4, 3}},
                              {{2, 5, 4}, {2, 4, 2}},
                              {{2, 4, 4}, {2, 5, 2}},
                              {{8, 4}, {2, 4, 2}}})
    expectError([&] { open({{prefix + "gate_up_proj", iota(gateUp, 0)},
                            {prefix + "down_proj", iota(down, 0)}}); },
                {file, "'" + prefix + "gate_up_proj' " + shapeToString(gateUp),
                 "'" + prefix + "down_proj' " + shapeToString(down), "do not fit"});
}

} // namespace
