//===- MachineMeasurements.h - This machine's probes, kept across runs -*- C++ -*-===//
//
// Measuring the machine (the sgemm and copy probes, about 2 s, and every GEMM
// shape a cpu plan needs, 0.03 to 0.2 s each) costs a small model's run
// twenty times its steps. When KILN_CPU_MEASUREMENTS names a file, the first
// process measures and records there what it measured; later processes on the
// same machine read it instead of measuring again. A sweep of short runs and
// the test suite set it; a run that wants this moment's figures (calibration,
// a planned-vs-measured check) leaves it unset: the file keeps the machine's
// load of the moment it was written.
//
// The file is JSON: {"machine": <CPU model, cores, memory>, "sgemm_flops",
// "memory_bandwidth", "gemm_seconds": {<shape>: seconds}}. One written on
// another machine (a shared home directory) is measured over; a malformed one
// is an error naming the file and the field.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_RUNTIME_MACHINEMEASUREMENTS_H
#define KILN_RUNTIME_MACHINEMEASUREMENTS_H

#include "kiln/Runtime/CpuPeak.h"

#include <nlohmann/json.hpp>

#include <functional>
#include <string>

namespace kiln {

class MachineMeasurements {
public:
  /// The store KILN_CPU_MEASUREMENTS names (one per process), or null when
  /// the variable is unset or empty.
  static MachineMeasurements *fromEnvironment();

  explicit MachineMeasurements(std::string path);

  /// The recorded rates, else `measure()`'s, recorded. The file's lock is
  /// held while measuring: processes starting together wait for one probe
  /// instead of running theirs side by side (each disturbing the others').
  CpuRates rates(const std::function<CpuRates()> &measure);
  /// The recorded seconds of the GEMM `shape` names, else `measure()`'s,
  /// recorded. Measured without the lock: ranks time their shapes together,
  /// as their steps will run them.
  double gemmSeconds(const std::string &shape, const std::function<double()> &measure);

  const std::string &path() const { return path_; }
  /// This machine as the file names it: "<CPU model>, <cores> cores, <GiB> GiB".
  static std::string machineName();

private:
  /// The file's records for this machine (empty if it is absent or from
  /// another machine); checks every field.
  nlohmann::json load() const;
  /// Re-reads the file under its lock, lets `update` change the records and
  /// writes them back (store).
  void record(const std::function<void(nlohmann::json &)> &update);
  /// Writes `records` atomically and keeps them as the known ones; the
  /// caller holds the lock.
  void store(nlohmann::json records);

  std::string path_;
  nlohmann::json known_; ///< the records as last read or written
  bool loaded_ = false;
};

} // namespace kiln

#endif // KILN_RUNTIME_MACHINEMEASUREMENTS_H
