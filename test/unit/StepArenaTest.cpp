//===- StepArenaTest.cpp - A compiled step's temporaries in one arena -----===//
//
// The planner lays out blocks whose lifetimes overlap apart and lets the
// others share bytes; a traced run becomes the plan, a replay takes nothing
// from the system, and a run that departs from the trace falls back to it
// and is traced again.
//
//===----------------------------------------------------------------------===//

#include "kiln/Backend/Compiled/StepArena.h"

#include <gtest/gtest.h>

#include <cstring>

using namespace kiln;

// A lives [0, 4), B [1, 2), C [2, 4) (events): B and C never overlap in time.
TEST(StepArenaTest, BlocksShareBytesOnlyWhenTheirLifetimesDoNot) {
  std::vector<size_t> bytes{1024, 512, 512}, offsets;
  std::vector<int64_t> start{0, 1, 2}, end{4, 2, 4};
  size_t total = StepArena::layOut(bytes, start, end, offsets);
  EXPECT_EQ(total, 1536u); // the live peak, not the sum (2048)
  EXPECT_EQ(offsets[0], 0u);
  EXPECT_EQ(offsets[1], 1024u);
  EXPECT_EQ(offsets[2], 1024u);
  // Every pair live at once is apart.
  for (size_t a = 0; a < bytes.size(); ++a)
    for (size_t b = a + 1; b < bytes.size(); ++b)
      if (start[a] < end[b] && start[b] < end[a]) {
        EXPECT_TRUE(offsets[a] + bytes[a] <= offsets[b] || offsets[b] + bytes[b] <= offsets[a])
            << a << " and " << b;
      }
}

namespace {

/// One "step": three buffers, the first two released before the third is
/// taken, each written in full (so that an overlap would show).
std::vector<void *> runStep(StepArena &arena, size_t third = 4000) {
  arena.begin();
  std::vector<void *> seen;
  void *a = arena.allocate(3000, 64);
  void *b = arena.allocate(2000, 64);
  std::memset(a, 1, 3000);
  std::memset(b, 2, 2000);
  seen = {a, b};
  arena.release(a);
  arena.release(b);
  void *c = arena.allocate(third, 64);
  std::memset(c, 3, third);
  seen.push_back(c);
  arena.release(c);
  arena.end();
  return seen;
}

} // namespace

TEST(StepArenaTest, TheFirstRunIsTracedAndLaterRunsTakeNothingFromTheSystem) {
  StepArena arena;
  runStep(arena);
  EXPECT_EQ(arena.lastRun().systemAllocations, 3);
  EXPECT_EQ(arena.lastRun().arenaAllocations, 0);
  // a and b together (3008 + 2048 after rounding to 64), c after both.
  EXPECT_EQ(arena.lastRun().peakLiveBytes, 3008 + 2048);
  EXPECT_GE(arena.arenaBytes(), 3008 + 2048);
  EXPECT_LT(arena.arenaBytes(), 3008 + 2048 + 4032);
  std::vector<void *> first = runStep(arena), second = runStep(arena);
  EXPECT_EQ(arena.lastRun().systemAllocations, 0);
  EXPECT_EQ(arena.lastRun().arenaAllocations, 3);
  EXPECT_EQ(first, second); // the same planned blocks every run
  EXPECT_NE(first[0], first[1]);
}

TEST(StepArenaTest, ARunThatDepartsFromTheTraceFallsBackAndIsTracedAgain) {
  StepArena arena;
  runStep(arena);
  runStep(arena, 5000); // the third buffer is larger than traced
  EXPECT_EQ(arena.lastRun().arenaAllocations, 2);
  EXPECT_EQ(arena.lastRun().systemAllocations, 1);
  runStep(arena, 5000); // traced again
  EXPECT_EQ(arena.lastRun().systemAllocations, 3);
  runStep(arena, 5000);
  EXPECT_EQ(arena.lastRun().systemAllocations, 0);
  EXPECT_EQ(arena.lastRun().arenaAllocations, 3);
}
