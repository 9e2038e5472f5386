//===- CpuPeak.h - This machine's attainable FLOP rate ----------*- C++ -*-===//
#ifndef KILN_RUNTIME_CPUPEAK_H
#define KILN_RUNTIME_CPUPEAK_H

namespace kiln {

/// Best sustained single-precision GEMM rate of this machine in FLOP/s,
/// measured once per process with OpenBLAS (eight 1024^3 sgemms, ~0.1 s) and
/// cached. MFU on CPU is reported against it: a CPU has no single published
/// peak that its vector units, clocks and core count would all agree with.
double measureCpuPeakFlops();

} // namespace kiln

#endif // KILN_RUNTIME_CPUPEAK_H
