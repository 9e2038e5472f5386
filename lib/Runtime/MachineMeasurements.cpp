//===- MachineMeasurements.cpp - This machine's probes, kept across runs --===//

#include "kiln/Runtime/MachineMeasurements.h"
#include "kiln/Support/Error.h"
#include "kiln/Support/Json.h"

#include <fmt/format.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <thread>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

namespace kiln {

namespace {

constexpr const char *kVariable = "KILN_CPU_MEASUREMENTS";

/// An exclusive flock on `<file>.lock` for its scope (the records file itself
/// is replaced by rename, so it cannot carry the lock).
class FileLock {
public:
  explicit FileLock(const std::string &file) {
    std::string path = file + ".lock";
    fd_ = ::open(path.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
    if (fd_ < 0)
      fail("{} ({}): cannot create the lock file '{}': {}", file, kVariable, path,
           std::strerror(errno));
    while (::flock(fd_, LOCK_EX) != 0)
      if (errno != EINTR)
        fail("{} ({}): cannot lock '{}': {}", file, kVariable, path, std::strerror(errno));
  }
  ~FileLock() { ::close(fd_); } // closing releases the lock
  FileLock(const FileLock &) = delete;
  FileLock &operator=(const FileLock &) = delete;

private:
  int fd_ = -1;
};

/// A record that must be a positive, finite number.
void checkPositive(const nlohmann::json &value, const std::string &file, const std::string &field) {
  if (!value.is_number() || !std::isfinite(value.get<double>()) || value.get<double>() <= 0)
    fail("{} ({}): field '{}': expected a positive number, got {}; delete the file to measure "
         "again",
         file, kVariable, field, briefJson(value));
}

} // namespace

MachineMeasurements *MachineMeasurements::fromEnvironment() {
  static std::unique_ptr<MachineMeasurements> store = [] {
    const char *path = std::getenv(kVariable);
    return path && *path ? std::make_unique<MachineMeasurements>(path) : nullptr;
  }();
  return store.get();
}

MachineMeasurements::MachineMeasurements(std::string path) : path_(std::move(path)) {}

std::string MachineMeasurements::machineName() {
  // Read once: every load() compares against it.
  static const std::string name = [] {
    std::string model = "unknown CPU";
    std::ifstream cpuinfo("/proc/cpuinfo");
    for (std::string line; std::getline(cpuinfo, line);)
      if (line.rfind("model name", 0) == 0 && line.find(':') != std::string::npos) {
        model = line.substr(line.find(':') + 1);
        model.erase(0, model.find_first_not_of(" \t"));
        break;
      }
    return fmt::format("{}, {} cores, {} GiB", model, std::thread::hardware_concurrency(),
                       (physicalMemoryBytes() + (int64_t(1) << 29)) >> 30);
  }();
  return name;
}

nlohmann::json MachineMeasurements::load() const {
  nlohmann::json fresh = {{"machine", machineName()}};
  std::error_code ec;
  if (!std::filesystem::exists(path_, ec))
    return fresh;
  std::string text = readFile(path_);
  nlohmann::json doc = jsonTooDeep(text) ? nlohmann::json()
                                         : nlohmann::json::parse(text, nullptr, false);
  if (!doc.is_object())
    fail("{} ({}): not a JSON object of measurements; delete the file to measure again", path_,
         kVariable);
  if (!doc.contains("machine") || !doc["machine"].is_string())
    fail("{} ({}): field 'machine': expected the name of the machine measured, got {}", path_,
         kVariable, doc.contains("machine") ? briefJson(doc["machine"]) : "nothing");
  if (doc["machine"] != fresh["machine"]) {
    static bool told = false;
    if (!told)
      fmt::print(stderr, "note: {} holds the measurements of '{}', not of this machine ('{}'): "
                         "measuring again\n",
                 path_, doc["machine"].get<std::string>(), fresh["machine"].get<std::string>());
    told = true;
    return fresh;
  }
  for (const char *field : {"sgemm_flops", "memory_bandwidth"})
    if (doc.contains(field))
      checkPositive(doc[field], path_, field);
  if (doc.contains("gemm_seconds")) {
    if (!doc["gemm_seconds"].is_object())
      fail("{} ({}): field 'gemm_seconds': expected an object of seconds by GEMM shape, got {}",
           path_, kVariable, briefJson(doc["gemm_seconds"]));
    for (const auto &[shape, seconds] : doc["gemm_seconds"].items())
      checkPositive(seconds, path_, "gemm_seconds." + shape);
  }
  return doc;
}

void MachineMeasurements::store(nlohmann::json records) {
  writeFileAtomic(path_, records.dump(1) + "\n");
  known_ = std::move(records);
  loaded_ = true;
}

void MachineMeasurements::record(const std::function<void(nlohmann::json &)> &update) {
  FileLock lock(path_);
  nlohmann::json records = load();
  update(records);
  store(std::move(records));
}

CpuRates MachineMeasurements::rates(const std::function<CpuRates()> &measure) {
  // Not record(): the lock is held across the probe too.
  FileLock lock(path_);
  nlohmann::json records = load();
  if (records.contains("sgemm_flops") && records.contains("memory_bandwidth"))
    return {records["sgemm_flops"].get<double>(), records["memory_bandwidth"].get<double>()};
  CpuRates measured = measure();
  records["sgemm_flops"] = measured.sgemmFlops;
  records["memory_bandwidth"] = measured.memoryBandwidth;
  store(std::move(records));
  return measured;
}

double MachineMeasurements::gemmSeconds(const std::string &shape,
                                        const std::function<double()> &measure) {
  if (!loaded_) {
    known_ = load();
    loaded_ = true;
  }
  if (known_.contains("gemm_seconds") && known_["gemm_seconds"].contains(shape))
    return known_["gemm_seconds"][shape].get<double>();
  double seconds = measure();
  record([&](nlohmann::json &records) { records["gemm_seconds"][shape] = seconds; });
  return seconds;
}

} // namespace kiln
