//===- KernelCheck.h - A kernel against the ops it replaces -------*- C++ -*-===//
//
// `kiln check-kernel`: builds the op a kernel replaces on random inputs,
// substitutes the kernel exactly as an override rule would, differentiates
// both with the compiler's own reverse mode, runs both on the CPU and
// compares every output and input gradient.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_DRIVER_KERNELCHECK_H
#define KILN_DRIVER_KERNELCHECK_H

#include "kiln/CustomKernels/CheckCase.h"

#include <cstdint>
#include <string>
#include <vector>

namespace kiln {

struct KernelCheckOptions {
  /// Overrides of the kernel's default dimensions (names must be its own).
  KernelCheckShape shape;
  bool bf16 = false;
  uint64_t seed = 0;
};

struct KernelCheckReport {
  std::string kernel, target;
  KernelCheckShape shape; ///< every dimension used
  double tolerance = 0;
  struct Output {
    std::string name;     ///< a result, or d<input> for a gradient
    double maxAbs = 0;    ///< max |kernel - reference|
    double maxRel = 0;    ///< maxAbs / max |reference|
  };
  std::vector<Output> outputs;
  bool passed() const;
};

/// The kernel's default check dimensions; throws kiln::Error for an unknown
/// kernel.
KernelCheckShape kernelCheckShape(const std::string &kernel);
/// Runs the check; throws kiln::Error for an unknown kernel or dimension.
KernelCheckReport checkKernel(const std::string &kernel, const KernelCheckOptions &options);
/// Every registered kernel's name.
std::vector<std::string> registeredKernelNames();

} // namespace kiln

#endif // KILN_DRIVER_KERNELCHECK_H
