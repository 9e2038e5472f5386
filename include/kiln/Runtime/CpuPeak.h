//===- CpuPeak.h - This machine's attainable FLOP rate ----------*- C++ -*-===//
#ifndef KILN_RUNTIME_CPUPEAK_H
#define KILN_RUNTIME_CPUPEAK_H

#include <cstdint>
#include <string>

namespace kiln {

/// What this machine sustains with all of its cores, whatever the process's
/// own thread settings: ranks sharing the machine share these rates.
struct CpuRates {
  /// Sustained single-precision GEMM rate in FLOP/s (OpenBLAS, 2048^3 sgemms
  /// for about 2 s). MFU on CPU is reported against
  /// it: a CPU has no single published peak that its vector units, clocks and
  /// core count would all agree with.
  double sgemmFlops = 0;
  /// Sustained memory bandwidth in bytes/s (read plus write), from a threaded
  /// copy between two 256 MiB buffers.
  double memoryBandwidth = 0;
};

/// This machine's rates: measured on first use, once per process, unless a
/// rank on the same machine measured them and they were adopted (the ranks
/// must not measure side by side, each disturbing the others' probe), or
/// an earlier process recorded them in the file KILN_CPU_MEASUREMENTS names
/// (MachineMeasurements.h).
CpuRates cpuRates();
void adoptCpuRates(CpuRates rates);
/// Where cpuRates() came from, for the line that prints them: "measured", or
/// "measured earlier, read from KILN_CPU_MEASUREMENTS=<file>".
const std::string &cpuRatesSource();

double measureCpuPeakFlops();       ///< cpuRates().sgemmFlops
double measureCpuMemoryBandwidth(); ///< cpuRates().memoryBandwidth

/// Physical memory of this machine in bytes (sysconf).
int64_t physicalMemoryBytes();

/// "12.34%", and when `mfu` exceeds 1 the reason it can: the measured probe
/// is not a hardware bound. Never prints an MFU above 100% without it.
std::string describeMfu(double mfu, double peakFlops);

} // namespace kiln

#endif // KILN_RUNTIME_CPUPEAK_H
