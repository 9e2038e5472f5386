// runPipelineSchedule on 4 MPI ranks: each schedule's actions, with a toy
// stage (forward y = 2x + s, backward multiplies the cotangent by 2) whose
// result is known in closed form, moved between pipeline ranks over MPI.
// Each boundary carries two tensors, the second the microbatch's number, so
// a transfer received for the wrong microbatch or stage shows.
#include "kiln/Backend/CPU/PipelineRunner.h"
#include "kiln/Config/PipelineSchedule.h"
#include "kiln/Support/Error.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>

using namespace kiln;

namespace {

Tensor filled(float value) {
  Tensor t(DType::F32, {3});
  for (int i = 0; i < 3; ++i)
    t.mutableData<float>()[i] = value;
  return t;
}

float first(const Tensor &t) { return t.data<float>()[0]; }

/// Runs `schedule` on a grid whose first axis is pp and checks, on the rank
/// of the last stage, every microbatch's output, and on the rank of stage
/// 0, the cotangent that reached it.
void runToy(const PipelineSchedule &schedule, DeviceGrid &grid) {
  int64_t stages = schedule.numStages(), pipelineRank = grid.coordinates()[0];
  std::map<int64_t, float> outputs, cotangents; // by microbatch
  PipelineStageCalls calls;
  calls.transfers = [](int64_t) {
    return std::vector<std::pair<DType, Shape>>{{DType::F32, {3}}, {DType::F32, {3}}};
  };
  calls.forward = [&](int64_t s, int64_t m, std::vector<Tensor> in) -> std::vector<Tensor> {
    EXPECT_EQ(schedule.rankOf(s), pipelineRank);
    float x = float(m + 1);
    if (s > 0) {
      EXPECT_EQ(in.size(), 2u);
      EXPECT_EQ(first(in[1]), float(m)) << "stage " << s << " received another microbatch";
      x = first(in[0]);
    }
    float y = 2 * x + float(s);
    if (s + 1 == stages) {
      outputs[m] = y;
      return {};
    }
    return {filled(y), filled(float(m))};
  };
  calls.backward = [&](int64_t s, int64_t m, std::vector<Tensor> cot) -> std::vector<Tensor> {
    float c = s + 1 == stages ? 1.0f : first(cot.at(0));
    if (s + 1 < stages)
      EXPECT_EQ(first(cot.at(1)), float(-m)) << "stage " << s << " cotangent of another microbatch";
    if (s == 0) {
      cotangents[m] = c;
      return {};
    }
    return {filled(2 * c), filled(float(-m))};
  };
  runPipelineSchedule(schedule, pipelineRank, calls, grid, 0);

  for (int64_t m = 0; m < schedule.microbatches; ++m) {
    if (schedule.rankOf(stages - 1) == pipelineRank) {
      double x = double(m + 1);
      for (int64_t s = 0; s < stages; ++s)
        x = 2 * x + double(s);
      EXPECT_EQ(outputs.at(m), float(x)) << "microbatch " << m;
    }
    if (schedule.rankOf(0) == pipelineRank)
      EXPECT_EQ(cotangents.at(m), float(std::pow(2.0, double(stages - 1)))) << "microbatch " << m;
  }
}

} // namespace

TEST(PipelineRunner, SchedulesRunOnTwoPipelineRanksOfTwoDataParallelRanks) {
  DeviceGrid grid({"pp", "dp"}, {2, 2});
  for (PipelineScheduleKind kind : {PipelineScheduleKind::GPipe, PipelineScheduleKind::OneFOneB}) {
    SCOPED_TRACE(std::string(wordOf(kind)));
    runToy(buildPipelineSchedule(kind, 2, 1, 4), grid);
  }
  runToy(buildPipelineSchedule(PipelineScheduleKind::Interleaved1F1B, 2, 2, 4), grid);
  EXPECT_GT(grid.bytesSent().at("pp"), 0);
  // Peers are found along one axis; one outside it is an error (no message sent).
  EXPECT_EQ(grid.peerRank(0, 1 - grid.coordinates()[0]), (grid.rank() + 2) % 4);
  EXPECT_THROW(grid.peerRank(0, 2), Error);
}

TEST(PipelineRunner, SchedulesRunOnFourPipelineRanks) {
  DeviceGrid grid({"pp"}, {4});
  runToy(buildPipelineSchedule(PipelineScheduleKind::OneFOneB, 4, 1, 6), grid);
  runToy(buildPipelineSchedule(PipelineScheduleKind::Interleaved1F1B, 4, 2, 8), grid);
  runToy(buildPipelineSchedule(PipelineScheduleKind::GPipe, 4, 1, 3), grid);
}

// A tensor shared by some pipeline ranks (a tied table's gradient) is summed
// among them alone, in rank order, and every holder gets the same sum; a rank
// not among the holders, or a non-f32 tensor, is refused before any message.
TEST(PipelineRunner, SumsOverTheHoldingPipelineRanks) {
  DeviceGrid grid({"pp"}, {4});
  int64_t me = grid.coordinates()[0];
  std::vector<int64_t> holders = {0, 3};
  if (me == 0 || me == 3) {
    Tensor mine(DType::F32, {3});
    for (int64_t i = 0; i < 3; ++i)
      mine.mutableData<float>()[i] = float(10 * me + i);
    Tensor sum = sumOverPipelineRanks(mine, holders, me, grid, 0, 7);
    for (int64_t i = 0; i < 3; ++i)
      EXPECT_EQ(sum.data<float>()[i], float(30 + 2 * i)); // 0 + i and 30 + i
  }
  EXPECT_THROW(sumOverPipelineRanks(Tensor(DType::F32, {1}), {0, 3}, me == 1 ? 1 : 2, grid, 0, 8),
               Error);
  EXPECT_THROW(sumOverPipelineRanks(Tensor(DType::I64, {1}), {me}, me, grid, 0, 9), Error);
  // A single holder keeps its tensor.
  Tensor alone(DType::F32, {1});
  alone.mutableData<float>()[0] = 5;
  EXPECT_EQ(sumOverPipelineRanks(alone, {me}, me, grid, 0, 10).data<float>()[0], 5.0f);
}
