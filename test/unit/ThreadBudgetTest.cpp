//===- ThreadBudgetTest.cpp - Thread counts set for a scope and restored --===//

#include "kiln/Runtime/ThreadBudget.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <thread>
#include <utility>

using kiln::ThreadBudget;

namespace {
/// OpenMP's and OpenBLAS's counts now.
std::pair<int, int> counts() { return {ThreadBudget::openMpThreads(), ThreadBudget::blasThreads()}; }
} // namespace

TEST(ThreadBudget, SetsBothCountsAndRestoresEachOnExit) {
  // Different starting counts, so each pool is seen restored to its own.
  ThreadBudget outer = ThreadBudget::threads(3);
  {
    ThreadBudget blas = ThreadBudget::blasSingleThreaded();
    ASSERT_EQ(counts(), std::make_pair(3, 1));
    {
      ThreadBudget two = ThreadBudget::threads(2);
      EXPECT_EQ(counts(), std::make_pair(2, 2));
    }
    EXPECT_EQ(counts(), std::make_pair(3, 1));
    {
      ThreadBudget all = ThreadBudget::allCores();
      int cores = std::max(1, int(std::thread::hardware_concurrency()));
      EXPECT_EQ(counts(), std::make_pair(cores, cores));
    }
    EXPECT_EQ(counts(), std::make_pair(3, 1));
  }
  EXPECT_EQ(counts(), std::make_pair(3, 3));
}

TEST(ThreadBudget, NoBudgetLeavesBothCountsAlone) {
  ThreadBudget outer = ThreadBudget::threads(3);
  {
    ThreadBudget blas = ThreadBudget::blasSingleThreaded();
    ThreadBudget none = ThreadBudget::threads(0);
    EXPECT_EQ(counts(), std::make_pair(3, 1));
  }
  EXPECT_EQ(counts(), std::make_pair(3, 3));
}
