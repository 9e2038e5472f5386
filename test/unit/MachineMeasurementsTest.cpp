//===- MachineMeasurementsTest.cpp - Probes kept across processes ---------===//
//
// The measuring functions here count their calls and return made-up figures,
// so what is checked is the store's bookkeeping: each figure is measured once
// per file, read back exactly, measured again for another machine, and a
// malformed file is an error naming it and its field.
//
//===----------------------------------------------------------------------===//

#include "kiln/Runtime/MachineMeasurements.h"
#include "kiln/Support/Error.h"
#include "kiln/Support/Json.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <thread>
#include <unistd.h>

using namespace kiln;
using ::testing::AllOf;
using ::testing::HasSubstr;
namespace fs = std::filesystem;

namespace {

class MachineMeasurementsTest : public ::testing::Test {
protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("kiln-measurements-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    file_ = (dir_ / "cpu.json").string();
  }
  void TearDown() override { fs::remove_all(dir_); }

  /// Made-up rates, counting the probes that ran.
  std::function<CpuRates()> probe(int &count, double flops = 5e10) {
    return [&count, flops] {
      ++count;
      return CpuRates{flops, 2e10};
    };
  }

  void writeFile(const std::string &text) { writeFileAtomic(file_, text); }

  /// The message of the kiln::Error a fresh store's rates() throws on a
  /// file holding `text`.
  std::string ratesError(const std::string &text) {
    writeFile(text);
    int probes = 0;
    try {
      MachineMeasurements(file_).rates(probe(probes));
    } catch (const Error &e) {
      EXPECT_EQ(probes, 0);
      return e.what();
    }
    return "no error";
  }

  fs::path dir_;
  std::string file_;
};

} // namespace

TEST_F(MachineMeasurementsTest, RatesAreMeasuredOnceAndReadBackExactly) {
  int probes = 0;
  CpuRates first = MachineMeasurements(file_).rates(probe(probes, 123456789.125));
  EXPECT_EQ(probes, 1);
  // A later process: the file's figures, bit for bit, and no probe.
  CpuRates again = MachineMeasurements(file_).rates(probe(probes, 1.0));
  EXPECT_EQ(probes, 1);
  EXPECT_EQ(again.sgemmFlops, first.sgemmFlops);
  EXPECT_EQ(again.memoryBandwidth, first.memoryBandwidth);
  EXPECT_EQ(again.sgemmFlops, 123456789.125);
}

TEST_F(MachineMeasurementsTest, GemmShapesAreKeptBesideTheRates) {
  int probes = 0, timings = 0;
  MachineMeasurements one(file_);
  auto time = [&timings](double seconds) {
    return [&timings, seconds] {
      ++timings;
      return seconds;
    };
  };
  EXPECT_EQ(one.gemmSeconds("64x64x64 NN 1 threads", time(0.25)), 0.25);
  EXPECT_EQ(one.gemmSeconds("64x64x64 NN 1 threads", time(9.0)), 0.25);
  one.rates(probe(probes));
  EXPECT_EQ(one.gemmSeconds("32x64x64 NT 2 threads", time(0.5)), 0.5);
  EXPECT_EQ(timings, 2);
  // Another process reads both shapes and the rates; a new shape is timed.
  MachineMeasurements two(file_);
  EXPECT_EQ(two.gemmSeconds("64x64x64 NN 1 threads", time(9.0)), 0.25);
  EXPECT_EQ(two.gemmSeconds("32x64x64 NT 2 threads", time(9.0)), 0.5);
  EXPECT_EQ(two.gemmSeconds("32x64x64 NT 1 threads", time(0.75)), 0.75);
  two.rates(probe(probes));
  EXPECT_EQ(timings, 3);
  EXPECT_EQ(probes, 1);
  nlohmann::json records = nlohmann::json::parse(readFile(file_));
  EXPECT_EQ(records["machine"], MachineMeasurements::machineName());
  EXPECT_EQ(records["gemm_seconds"].size(), 3u);
}

TEST_F(MachineMeasurementsTest, AnotherMachinesFileIsMeasuredOver) {
  writeFile(R"({"machine": "a CPU that is not this one, 96 cores, 768 GiB",
                "sgemm_flops": 1e13, "memory_bandwidth": 1e12})");
  int probes = 0;
  CpuRates rates = MachineMeasurements(file_).rates(probe(probes, 4e10));
  EXPECT_EQ(probes, 1);
  EXPECT_EQ(rates.sgemmFlops, 4e10);
  nlohmann::json records = nlohmann::json::parse(readFile(file_));
  EXPECT_EQ(records["machine"], MachineMeasurements::machineName());
  EXPECT_EQ(records["sgemm_flops"], 4e10);
}

TEST_F(MachineMeasurementsTest, ProcessesStartingTogetherShareOneProbe) {
  // Separate stores hold separate descriptors, so their flocks exclude each
  // other as two processes' would; the second waits for the first's probe.
  std::atomic<int> probes{0};
  auto slowProbe = [&probes] {
    ++probes;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    return CpuRates{6e10, 3e10};
  };
  CpuRates a, b;
  std::thread first([&] { a = MachineMeasurements(file_).rates(slowProbe); });
  std::thread second([&] { b = MachineMeasurements(file_).rates(slowProbe); });
  first.join();
  second.join();
  EXPECT_EQ(probes.load(), 1);
  EXPECT_EQ(a.sgemmFlops, 6e10);
  EXPECT_EQ(b.sgemmFlops, 6e10);
}

TEST_F(MachineMeasurementsTest, MalformedFilesAreErrorsNamingTheFileAndField) {
  std::string machine = nlohmann::json(MachineMeasurements::machineName()).dump();
  EXPECT_THAT(ratesError("{\"machine\": " + machine + ", \"sgemm_flops\": "),
              AllOf(HasSubstr(file_), HasSubstr("not a JSON object of measurements")));
  EXPECT_THAT(ratesError("{\"sgemm_flops\": 1e10}"),
              HasSubstr("field 'machine': expected the name of the machine measured, got "
                        "nothing"));
  EXPECT_THAT(
      ratesError("{\"machine\": " + machine + ", \"sgemm_flops\": -3, \"memory_bandwidth\": 1}"),
      HasSubstr("field 'sgemm_flops': expected a positive number, got -3"));
  EXPECT_THAT(ratesError("{\"machine\": " + machine +
                         ", \"gemm_seconds\": {\"64x64x64 NN 1 threads\": \"fast\"}}"),
              HasSubstr("field 'gemm_seconds.64x64x64 NN 1 threads': expected a positive number"));
  EXPECT_THAT(ratesError("{\"machine\": " + machine + ", \"gemm_seconds\": [1, 2]}"),
              HasSubstr("field 'gemm_seconds': expected an object of seconds by GEMM shape"));
  // The malformed file is left as it was for its owner to look at.
  EXPECT_EQ(readFile(file_), "{\"machine\": " + machine + ", \"gemm_seconds\": [1, 2]}");
}
