//===- ThreadBudgetTest.cpp - The thread count set for a scope, restored --===//

#include "kiln/Runtime/ThreadBudget.h"

#include <cblas.h>
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <thread>
#include <utility>
#include <vector>

using kiln::ThreadBudget;

namespace {
/// OpenMP's count and OpenBLAS's own record of it, which a budget keeps equal.
std::pair<int, int> counts() { return {omp_get_max_threads(), openblas_get_num_threads()}; }
} // namespace

TEST(ThreadBudget, TheLinkedOpenBlasIsTheOpenMpBuild) {
  // The pthread build would run its own pool against OpenMP's and make
  // GEMMs issued inside a team (flash attention's) contend for its lock.
  EXPECT_TRUE(ThreadBudget::blasSharesTheOpenMpPool());
}

TEST(ThreadBudget, SetsTheCountAndRestoresItOnExit) {
  ThreadBudget outer = ThreadBudget::threads(3);
  ASSERT_EQ(counts(), std::make_pair(3, 3));
  {
    ThreadBudget two = ThreadBudget::threads(2);
    EXPECT_EQ(counts(), std::make_pair(2, 2));
    EXPECT_EQ(ThreadBudget::current(), 2);
    {
      ThreadBudget all = ThreadBudget::allCores();
      int cores = std::max(1, int(std::thread::hardware_concurrency()));
      EXPECT_EQ(counts(), std::make_pair(cores, cores));
    }
    EXPECT_EQ(counts(), std::make_pair(2, 2));
  }
  EXPECT_EQ(counts(), std::make_pair(3, 3));
}

TEST(ThreadBudget, NoBudgetLeavesTheCountAlone) {
  ThreadBudget outer = ThreadBudget::threads(3);
  {
    ThreadBudget none = ThreadBudget::threads(0);
    EXPECT_EQ(counts(), std::make_pair(3, 3));
  }
  EXPECT_EQ(counts(), std::make_pair(3, 3));
}

TEST(ThreadBudget, GemmsIssuedInsideATeamAreExact) {
  // Each thread of a team issues its own GEMM (as flash attention does) and
  // gets the product a lone call gets.
  ThreadBudget budget = ThreadBudget::threads(3);
  const int n = 48;
  std::vector<float> a(n * n), b(n * n);
  for (int i = 0; i < n * n; ++i) {
    a[i] = float(i % 7) - 3.0f;
    b[i] = float(i % 5) * 0.5f;
  }
  std::vector<float> alone(n * n);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n, b.data(), n,
              0.0f, alone.data(), n);
  std::vector<std::vector<float>> inTeam(3, std::vector<float>(n * n));
#pragma omp parallel for num_threads(3)
  for (int t = 0; t < 3; ++t)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n,
                b.data(), n, 0.0f, inTeam[t].data(), n);
  for (const auto &product : inTeam)
    EXPECT_EQ(product, alone); // small integers and halves: exact in float
}
