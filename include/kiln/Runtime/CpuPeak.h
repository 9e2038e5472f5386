//===- CpuPeak.h - This machine's attainable FLOP rate ----------*- C++ -*-===//
#ifndef KILN_RUNTIME_CPUPEAK_H
#define KILN_RUNTIME_CPUPEAK_H

#include <cstdint>
#include <string>

namespace kiln {

/// Best sustained single-precision GEMM rate of this machine in FLOP/s,
/// measured once per process with OpenBLAS (the best of 1024^3 and 2048^3
/// sgemms, well under a second) and cached. MFU on CPU is reported against
/// it: a CPU has no single published peak that its vector units, clocks and
/// core count would all agree with.
double measureCpuPeakFlops();

/// Best sustained memory bandwidth of this machine in bytes/s (read plus
/// write), from a threaded copy between two 256 MiB buffers; measured once
/// per process and cached.
double measureCpuMemoryBandwidth();

/// Physical memory of this machine in bytes (sysconf).
int64_t physicalMemoryBytes();

/// "12.34%", and when `mfu` exceeds 1 the reason it can: the measured probe
/// is not a hardware bound. Never prints an MFU above 100% without it.
std::string describeMfu(double mfu, double peakFlops);

} // namespace kiln

#endif // KILN_RUNTIME_CPUPEAK_H
