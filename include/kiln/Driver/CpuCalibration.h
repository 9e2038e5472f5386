//===- CpuCalibration.h - Fit the cpu profile's efficiencies ------*- C++ -*-===//
//
// `kiln calibrate-cpu`: runs a training step on this machine with every op
// timed, plans the same per-rank step on the cpu target, and fits each
// efficiency factor of the profile so that the planned seconds of its op
// class equal the measured ones. The fitted factors are what
// targets/cpu.json ships (docs/planner.md).
//
//===----------------------------------------------------------------------===//
#ifndef KILN_DRIVER_CPUCALIBRATION_H
#define KILN_DRIVER_CPUCALIBRATION_H

#include "kiln/Driver/TrainConfig.h"
#include "kiln/Planner/TargetProfile.h"

#include <string>
#include <vector>

namespace kiln {

/// One fitted factor: the ops it covers, their measured and planned seconds
/// (before the fit, at the shipped profile) and the fitted value.
struct EfficiencyFit {
  std::string field;  ///< "efficiency.matmul"
  std::string ops;    ///< which ops fit it
  int64_t count = 0;
  double flops = 0;
  int64_t bytes = 0;
  double measuredSeconds = 0, shippedSeconds = 0;
  double shipped = 0, fitted = 0;
  /// A row with no factor to fit: ops timed as their GEMMs, measured at
  /// their shapes (gemm_seconds), shown planned against measured.
  bool measuredRates = false;
};

struct CpuCalibration {
  TargetProfile shipped, fitted;
  std::vector<EfficiencyFit> fits;
  int64_t steps = 0;
  /// The step: the fastest measured, and planned before and after the fit.
  double measuredStepSeconds = 0, shippedStepSeconds = 0, fittedStepSeconds = 0;
};

/// Trains `steps` (>= 2) steps of `config` on random tokens with every op
/// timed; each op's time is its fastest after the first step (the least
/// disturbed by other load on the machine).
CpuCalibration calibrateCpu(const TrainConfig &config, int64_t steps);

/// The fits as a table and the fitted "efficiency" object to paste into a
/// profile.
std::string formatCpuCalibration(const CpuCalibration &calibration);

} // namespace kiln

#endif // KILN_DRIVER_CPUCALIBRATION_H
