//===- TestUtil.h - Shared helpers for Kiln unit tests ----------*- C++ -*-===//
#ifndef KILN_TEST_UNIT_TESTUTIL_H
#define KILN_TEST_UNIT_TESTUTIL_H

#include "kiln/Runtime/SafeTensors.h"
#include "kiln/Runtime/Tensor.h"
#include "kiln/Support/Error.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

namespace kiln::test {

inline std::string dataPath(const std::string &relative) {
  return std::string(KILN_TEST_DATA_DIR) + "/" + relative;
}

/// An F32 tensor of N(0, stddev) samples.
inline Tensor randomTensor(Shape shape, std::mt19937 &rng, float stddev = 1.0f) {
  Tensor t(DType::F32, std::move(shape));
  std::normal_distribution<float> dist(0.0f, stddev);
  float *p = t.mutableData<float>();
  for (int64_t i = 0; i < t.numel(); ++i)
    p[i] = dist(rng);
  return t;
}

inline std::vector<double> toDoubles(const Tensor &t) {
  Tensor f = t.dtype() == DType::F32 ? t : t.toF32();
  return std::vector<double>(f.data<float>(), f.data<float>() + f.numel());
}

/// Largest |a[i] - b[i]|; the sizes must agree.
/// d loss / d x[i] for every i by central differences of step `step`
/// (loss reads x, which is restored after each probe).
template <typename Loss>
std::vector<double> centralDifferences(std::vector<double> &x, Loss loss, double step = 1e-4) {
  std::vector<double> fd(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    double orig = x[i];
    x[i] = orig + step;
    double up = loss();
    x[i] = orig - step;
    double down = loss();
    x[i] = orig;
    fd[i] = (up - down) / (2 * step);
  }
  return fd;
}

inline double maxAbsDiff(const std::vector<double> &a, const std::vector<double> &b) {
  EXPECT_EQ(a.size(), b.size());
  double worst = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i)
    worst = std::max(worst, std::abs(a[i] - b[i]));
  return worst;
}

/// Largest |a - b| over every tensor of `want`, which `got` must hold, and
/// nothing else (same keys).
inline double maxDiff(const TensorMap &got, const SafeTensorsFile &want) {
  double worst = 0;
  for (const std::string &name : want.names()) {
    auto it = got.find(name);
    EXPECT_NE(it, got.end()) << name;
    if (it != got.end())
      worst = std::max(worst, maxAbsDiff(toDoubles(it->second), toDoubles(want.get(name))));
  }
  EXPECT_EQ(got.size(), want.names().size());
  return worst;
}

/// Runs `fn`, expecting a kiln::Error whose message contains every fragment.
template <typename Fn>
void expectError(Fn fn, const std::vector<std::string> &fragments) {
  try {
    fn();
    ADD_FAILURE() << "expected kiln::Error";
  } catch (const Error &e) {
    for (const std::string &fragment : fragments)
      EXPECT_THAT(e.what(), ::testing::HasSubstr(fragment));
  }
}

/// A fresh directory under /tmp, removed with its contents on destruction.
class TempDir {
public:
  TempDir() {
    char tmpl[] = "/tmp/kiln-test-XXXXXX";
    if (!::mkdtemp(tmpl))
      throw std::runtime_error("mkdtemp failed");
    dir_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  TempDir(const TempDir &) = delete;
  TempDir &operator=(const TempDir &) = delete;

  std::string file(const std::string &name) const { return dir_ + "/" + name; }
  const std::string &path() const { return dir_; }
  /// Names of the directory's entries, sorted.
  std::vector<std::string> list() const {
    std::vector<std::string> out;
    for (const auto &e : std::filesystem::directory_iterator(dir_))
      out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  }

private:
  std::string dir_;
};

} // namespace kiln::test

#endif // KILN_TEST_UNIT_TESTUTIL_H
