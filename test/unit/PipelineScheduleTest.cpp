// Pipeline parallelism's stages and schedules: the stage split against
// hand-computed torchtitan splits, each schedule's order against hand-written
// action lists and its phases, and the simulated timeline against the
// published bubble formulas (Narayanan et al. 2021: (p-1)/(m+p-1) for GPipe
// and 1F1B, (p-1)/(v*m+p-1) interleaved over v stages per rank).
#include "kiln/Config/PipelineSchedule.h"
#include "TestUtil.h"
#include "kiln/Config/PipelineStages.h"
#include "kiln/Support/Error.h"

#include <gtest/gtest.h>

#include <string>

using namespace kiln;
using namespace kiln::test;

namespace {

PipelineStageOptions options(int64_t degree, PipelineScheduleKind schedule) {
  PipelineStageOptions o;
  o.degree = degree;
  o.schedule = schedule;
  return o;
}

using Modules = std::vector<std::vector<std::string>>;

} // namespace

TEST(PipelineStagesTest, GeneratedSplitCountsEmbeddingAndOutputAsLayers) {
  // Qwen3-0.6B's 28 layers on 4 ranks: 30 counted, 7 per stage, the first
  // two stages one more; the first gives one to the embedding, the last one
  // to the norm and output.
  PipelineStages s = resolvePipelineStages(options(4, PipelineScheduleKind::OneFOneB), 28);
  ASSERT_EQ(s.numStages(), 4);
  EXPECT_EQ(s.stagesPerRank, 1);
  auto layers = [](int first, int last) {
    std::vector<std::string> names;
    for (int i = first; i <= last; ++i)
      names.push_back("layers." + std::to_string(i));
    return names;
  };
  std::vector<std::string> first{"tok_embeddings"}, last = layers(22, 27);
  for (const std::string &l : layers(0, 6))
    first.push_back(l);
  last.push_back("norm");
  last.push_back("output");
  EXPECT_EQ(s.modules, (Modules{first, layers(7, 14), layers(15, 21), last}));
  EXPECT_EQ(s.stageOf("layers.15"), 2);
  EXPECT_EQ(s.stageOf("output"), 3);
  EXPECT_EQ(s.stageOf("layers.28"), -1);
}

TEST(PipelineStagesTest, InterleavedDefaultsToTwoStagesPerRankLooped) {
  // 4 layers, 6 counted over 4 stages: 2, 2, 1, 1.
  PipelineStages s = resolvePipelineStages(options(2, PipelineScheduleKind::Interleaved1F1B), 4);
  EXPECT_EQ(s.stagesPerRank, 2);
  EXPECT_EQ(s.modules, (Modules{{"tok_embeddings", "layers.0"},
                                {"layers.1", "layers.2"},
                                {"layers.3"},
                                {"norm", "output"}}));
  EXPECT_EQ(s.stagesOf(0), (std::vector<int64_t>{0, 2}));
  EXPECT_EQ(s.stagesOf(1), (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(s.rankOf(3), 1);
}

TEST(PipelineStagesTest, LayersPerStageSetsTheStageCount) {
  PipelineStageOptions o = options(4, PipelineScheduleKind::Interleaved1F1B);
  o.layersPerStage = 4; // 30 counted: 8 stages, 2 per rank
  PipelineStages s = resolvePipelineStages(o, 28);
  EXPECT_EQ(s.numStages(), 8);
  EXPECT_EQ(s.stagesPerRank, 2);

  o.schedule = PipelineScheduleKind::OneFOneB;
  expectError([&] { resolvePipelineStages(o, 28); },
              {"pipeline_parallel_schedule = 1F1B runs one stage per rank, but "
               "pipeline_parallel_layers_per_stage = 4 over 28 layers"});
  o.layersPerStage = 6; // 5 stages on 4 ranks
  expectError([&] { resolvePipelineStages(o, 28); },
              {"gives 5 stages, which the 4 pipeline ranks"});
  o.layersPerStage = 8; // 4 stages, interleaving needs 8
  o.schedule = PipelineScheduleKind::Interleaved1F1B;
  expectError([&] { resolvePipelineStages(o, 28); }, {"runs at least 2 stages per rank, but"});
}

TEST(PipelineStagesTest, SplitsThatCannotBeMadeAreErrors) {
  PipelineStageOptions o = options(4, PipelineScheduleKind::OneFOneB);
  o.firstStageLessLayers = 3; // 3 layers + 3 + 1 = 7 over 4 stages: 1 each
  expectError([&] { resolvePipelineStages(o, 3); },
              {"pipeline_parallel_first_stage_less_layers = 3 exceeds the 1 layers"});
  o = options(8, PipelineScheduleKind::OneFOneB);
  expectError([&] { resolvePipelineStages(o, 3); }, {"a stage would be empty"});
}

TEST(PipelineStagesTest, ListedModulesMustBeTheModelsOnceInOrder) {
  PipelineStageOptions o = options(2, PipelineScheduleKind::GPipe);
  o.moduleFqnsPerModelPart = {{"tok_embeddings", "layers.0"}, {"layers.1", "norm", "output"}};
  PipelineStages s = resolvePipelineStages(o, 2);
  EXPECT_EQ(s.modules, o.moduleFqnsPerModelPart);

  o.moduleFqnsPerModelPart = {{"tok_embeddings", "layers.1"}, {"layers.0", "norm", "output"}};
  expectError([&] { resolvePipelineStages(o, 2); },
              {"part 0 lists 'layers.1' where the model's next module is 'layers.0'"});
  o.moduleFqnsPerModelPart = {{"tok_embeddings", "layers.0"}, {"layers.1", "norm"}};
  expectError([&] { resolvePipelineStages(o, 2); }, {"the parts end before 'output'"});
  o.moduleFqnsPerModelPart = {{"tok_embeddings", "layers.0", "layers.1", "norm", "output"}, {}};
  expectError([&] { resolvePipelineStages(o, 2); }, {"part 1 is empty"});
}

TEST(PipelineScheduleTest, OneFOneBOnTwoStagesWithFourMicrobatches) {
  PipelineSchedule s = buildPipelineSchedule(PipelineScheduleKind::OneFOneB, 2, 1, 4);
  // Rank 0: one forward of warm-up, three forward-backward pairs, one
  // backward of cool-down; rank 1 (the last stage) alternates from the start.
  EXPECT_EQ(s.str(0), "0F0\n0SEND_F0\n"
                      "0F1\n0SEND_F1\n0RECV_B0\n0B0\n"
                      "0F2\n0SEND_F2\n0RECV_B1\n0B1\n"
                      "0F3\n0SEND_F3\n0RECV_B2\n0B2\n"
                      "0RECV_B3\n0B3\n");
  EXPECT_EQ(s.str(1), "1RECV_F0\n1F0\n1B0\n1SEND_B0\n"
                      "1RECV_F1\n1F1\n1B1\n1SEND_B1\n"
                      "1RECV_F2\n1F2\n1B2\n1SEND_B2\n"
                      "1RECV_F3\n1F3\n1B3\n1SEND_B3\n");
}

// Evaluation keeps each rank's forwards and the activations they move, in
// their order, and nothing of the backward.
TEST(PipelineScheduleTest, ForwardOnlyKeepsTheForwardsInOrder) {
  PipelineSchedule s = forwardOnly(buildPipelineSchedule(PipelineScheduleKind::OneFOneB, 2, 1, 3));
  EXPECT_EQ(s.str(0), "0F0\n0SEND_F0\n0F1\n0SEND_F1\n0F2\n0SEND_F2\n");
  EXPECT_EQ(s.str(1), "1RECV_F0\n1F0\n1RECV_F1\n1F1\n1RECV_F2\n1F2\n");
  EXPECT_EQ(s.microbatches, 3);
  PipelineSchedule looped =
      forwardOnly(buildPipelineSchedule(PipelineScheduleKind::Interleaved1F1B, 2, 2, 2));
  for (const std::vector<PipelineAction> &actions : looped.ranks) {
    // 4 forwards (2 stages x 2 microbatches) and 6 transfers: each of the
    // 3 boundaries a rank's stages touch, once per microbatch.
    EXPECT_EQ(actions.size(), 10u);
    for (const PipelineAction &a : actions)
      EXPECT_TRUE(a.kind == PipelineActionKind::Forward ||
                  a.kind == PipelineActionKind::SendActivation ||
                  a.kind == PipelineActionKind::RecvActivation)
          << a.str();
  }
}

// Stages of unequal work, by hand: GPipe on 2 ranks, 2 microbatches, stage 0
// forward 1 / backward 2, stage 1 forward 2 / backward 4. Rank 0 runs F0
// [0, 1] and F1 [1, 2]; rank 1 F0 [1, 3], F1 [3, 5], B0 [5, 9], B1 [9, 13];
// rank 0 B0 [9, 11] and B1 [13, 15]. Busy 6 + 12 of 2 x 15: bubble 40%.
TEST(PipelineScheduleTest, SimulatesStagesOfUnequalWork) {
  PipelineSchedule s = buildPipelineSchedule(PipelineScheduleKind::GPipe, 2, 1, 2);
  PipelineTimeline t = simulate(s, std::vector<double>{1, 2}, std::vector<double>{2, 4});
  EXPECT_DOUBLE_EQ(t.makespan, 15);
  EXPECT_DOUBLE_EQ(t.bubbleFraction, 0.4);
  expectError(
      [&] {
        simulate(s, std::vector<double>{1}, std::vector<double>{2, 4});
      },
      {"1 forward and 2 backward times for 2 stages"});
}

TEST(PipelineScheduleTest, GPipeRunsEveryForwardFirst) {
  PipelineSchedule s = buildPipelineSchedule(PipelineScheduleKind::GPipe, 2, 1, 2);
  EXPECT_EQ(s.str(0), "0F0\n0SEND_F0\n0F1\n0SEND_F1\n0RECV_B0\n0B0\n0RECV_B1\n0B1\n");
  EXPECT_EQ(s.str(1), "1RECV_F0\n1F0\n1RECV_F1\n1F1\n1B0\n1SEND_B0\n1B1\n1SEND_B1\n");
}

/// Forwards before the first backward, and backwards after the last forward.
std::pair<int64_t, int64_t> phases(const std::vector<PipelineAction> &actions) {
  int64_t warmup = 0, cooldown = 0;
  bool backwardSeen = false;
  for (const PipelineAction &a : actions) {
    if (a.kind == PipelineActionKind::Backward) {
      backwardSeen = true;
      ++cooldown;
    } else if (a.kind == PipelineActionKind::Forward) {
      warmup += backwardSeen ? 0 : 1;
      cooldown = 0;
    }
  }
  return {warmup, cooldown};
}

TEST(PipelineScheduleTest, OneFOneBPhasesAndActivationsInFlight) {
  const int64_t p = 4, m = 8;
  PipelineSchedule s = buildPipelineSchedule(PipelineScheduleKind::OneFOneB, p, 1, m);
  PipelineTimeline t = simulate(s, 1, 2);
  for (int64_t r = 0; r < p; ++r) {
    // p - r forwards before the first backward (p - r - 1 of warm-up and
    // the steady phase's first), p - r backwards after the last forward
    // (the steady phase's last and p - r - 1 of cool-down).
    EXPECT_EQ(phases(s.ranks[r]), std::make_pair(p - r, p - r)) << "rank " << r;
    EXPECT_EQ(t.peakInFlight[r], p - r) << "rank " << r;
  }
  // 100 bytes kept per microbatch on every stage: (p - r) x 100 at the peak.
  std::vector<int64_t> held = peakHeldBytes(s, std::vector<int64_t>(p, 100));
  for (int64_t r = 0; r < p; ++r)
    EXPECT_EQ(held[r], 100 * (p - r)) << "rank " << r;
  PipelineTimeline g = simulate(buildPipelineSchedule(PipelineScheduleKind::GPipe, p, 1, m), 1, 2);
  for (int64_t r = 0; r < p; ++r)
    EXPECT_EQ(g.peakInFlight[r], m) << "GPipe holds every microbatch, rank " << r;
}

TEST(PipelineScheduleTest, BubbleMatchesThePublishedFormulas) {
  for (PipelineScheduleKind kind : {PipelineScheduleKind::GPipe, PipelineScheduleKind::OneFOneB})
    for (int64_t p : {2, 4, 8})
      for (int64_t m : {8, 16, 32}) {
        PipelineTimeline t = simulate(buildPipelineSchedule(kind, p, 1, m), 1, 2);
        double formula = double(p - 1) / double(m + p - 1);
        EXPECT_NEAR(t.bubbleFraction, formula, 1e-12) << wordOf(kind) << " p=" << p << " m=" << m;
        EXPECT_DOUBLE_EQ(t.makespan, 3.0 * (m + p - 1));
      }
  for (int64_t p : {2, 4})
    for (int64_t v : {2, 3})
      for (int64_t m : {p, 2 * p, 4 * p}) {
        PipelineTimeline t =
            simulate(buildPipelineSchedule(PipelineScheduleKind::Interleaved1F1B, p, v, m), 1, 2);
        double formula = double(p - 1) / double(v * m + p - 1);
        EXPECT_NEAR(t.bubbleFraction, formula, 1e-12) << "p=" << p << " v=" << v << " m=" << m;
      }
}

TEST(PipelineScheduleTest, InterleavedOrderOnTwoRanks) {
  // p = 2, v = 2, m = 4: rounds of 2 microbatches; rank 0 (stages 0 and 2)
  // warms up with (v-1)*2 + 2*(p-1) = 4 forwards.
  PipelineSchedule s = buildPipelineSchedule(PipelineScheduleKind::Interleaved1F1B, 2, 2, 4);
  std::string compute;
  for (const PipelineAction &a : s.ranks[0])
    if (a.isCompute())
      compute += a.str() + " ";
  EXPECT_EQ(compute, "0F0 0F1 2F0 2F1 0F2 2B0 0F3 2B1 2F2 0B0 2F3 0B1 2B2 2B3 0B2 0B3 ");
  // Stage 0 keeps 10 bytes a microbatch, stage 2 keeps 1; held after each
  // action of rank 0: 10 20 21 22 32 31 41 40 41 31 32 22 21 20 10 0.
  EXPECT_EQ(peakHeldBytes(s, {10, 0, 1, 0})[0], 41);
}

TEST(PipelineScheduleTest, CountsTheScheduleCannotRunAreErrors) {
  expectError([] { buildPipelineSchedule(PipelineScheduleKind::OneFOneB, 4, 1, 3); },
              {"3 microbatches are fewer than the 4 pipeline ranks"});
  expectError([] { buildPipelineSchedule(PipelineScheduleKind::Interleaved1F1B, 4, 2, 9); },
              {"9 microbatches do not split into 2 equal rounds"});
  expectError([] { buildPipelineSchedule(PipelineScheduleKind::GPipe, 2, 2, 4); },
              {"runs exactly 1 stages per rank, got 2"});
  // GPipe needs no microbatch per rank.
  EXPECT_NO_THROW(simulate(buildPipelineSchedule(PipelineScheduleKind::GPipe, 4, 1, 1), 1, 2));
}

TEST(PipelineScheduleTest, DegenerateCountsAreErrors) {
  expectError([] { buildPipelineSchedule(PipelineScheduleKind::GPipe, 1, 1, 4); },
              {"pipeline_parallel_degree must be >= 2, got 1"});
  expectError([] { buildPipelineSchedule(PipelineScheduleKind::GPipe, 2, 1, 0); },
              {"needs at least one microbatch, got 0"});
}

TEST(PipelineScheduleTest, SimulationRefusesWorkOffItsRankOrTwice) {
  PipelineSchedule s = buildPipelineSchedule(PipelineScheduleKind::GPipe, 2, 1, 1);
  s.ranks[0][0].stage = 1; // stage 1 runs on rank 1
  expectError([&] { simulate(s, 1, 2); },
              {"rank 0 runs 1F0, which is not one of its stages' 1 microbatches"});
  s = buildPipelineSchedule(PipelineScheduleKind::GPipe, 2, 1, 1);
  s.ranks[0].insert(s.ranks[0].begin(), s.ranks[0][0]);
  expectError([&] { simulate(s, 1, 2); }, {"rank 0 runs 0F0 twice"});
}

TEST(PipelineScheduleTest, SimulationFindsDeadlocksAndMissingWork) {
  PipelineSchedule s = buildPipelineSchedule(PipelineScheduleKind::GPipe, 2, 1, 1);
  // Rank 0 waits for the cotangent before sending the activation it needs.
  std::swap(s.ranks[0][1], s.ranks[0][2]);
  expectError([&] { simulate(s, 1, 2); },
              {"GPipe deadlocks: rank 0 at 0RECV_B0, rank 1 at 1RECV_F0 wait for a send"});
  s = buildPipelineSchedule(PipelineScheduleKind::GPipe, 2, 1, 1);
  s.ranks[1].erase(s.ranks[1].begin() + 2, s.ranks[1].end()); // no backward on stage 1
  expectError([&] { simulate(s, 1, 2); }, {"stage 1 never runs the backward of microbatch 0"});
}
