//===- SgemmTimingTest.cpp - The cpu target's GEMM timings ----------------===//
//
// Times are the machine's, so only their relations are checked: a call is
// measured once per process, and a call too large to time is its cut-down
// shape's time scaled by the FLOPs.
//
//===----------------------------------------------------------------------===//

#include "kiln/Runtime/SgemmTiming.h"

#include <gtest/gtest.h>

using namespace kiln;

namespace {
double flops(const SgemmCall &c) { return 2.0 * double(c.m) * double(c.n) * double(c.k); }
} // namespace

TEST(SgemmTimingTest, EmptyCallsTakeNoTime) {
  EXPECT_EQ(sgemmSeconds({0, 64, 64}), 0.0);
  EXPECT_EQ(sgemmSeconds({64, 64, 0}), 0.0);
}

TEST(SgemmTimingTest, ACallIsMeasuredOncePerShapeAndThreadCount) {
  SgemmCall call{96, 160, 48, false, true, false};
  double first = sgemmSeconds(call, 1);
  EXPECT_GT(first, 0.0);
  EXPECT_EQ(sgemmSeconds(call, 1), first);
  SgemmCall accumulate = call;
  accumulate.accumulate = true;
  EXPECT_GT(sgemmSeconds(accumulate, 1), 0.0);
}

TEST(SgemmTimingTest, LargeCallsAreTheirCutShapeScaledByFlops) {
  // 8192^3 (1.1 TFLOP): m is cut to the floor of 256, then n to 476, under
  // 2 GFLOP; k, now the largest, is left as the cut stops there.
  SgemmCall big{8192, 8192, 8192, true, false, true};
  SgemmCall cut = sgemmTimedShape(big);
  EXPECT_EQ(cut.m, 256);
  EXPECT_EQ(cut.n, 476);
  EXPECT_EQ(cut.k, 8192);
  EXPECT_TRUE(cut.transA && !cut.transB && cut.accumulate);
  EXPECT_LE(flops(cut), 2e9);
  double seconds = sgemmSeconds(big, 1);
  EXPECT_DOUBLE_EQ(seconds, sgemmSeconds(cut, 1) * (flops(big) / flops(cut)));
  // Small calls are timed as they are.
  SgemmCall small{27, 1000, 128};
  SgemmCall same = sgemmTimedShape(small);
  EXPECT_EQ(same.m, 27);
  EXPECT_EQ(same.n, 1000);
  EXPECT_EQ(same.k, 128);
}
