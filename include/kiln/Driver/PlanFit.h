//===- PlanFit.h - kiln plan --fit: a target's factors from published runs -*- C++ -*-===//
//
// One set of efficiency factors per target, fitted rather than assumed: the
// factors named (matmul, attention, vector, memory, collective) moved to
// minimize the sum of squared log errors of the planned tokens/s per device
// (or step time) over every checked published run on that target
// (PlanValidation.h), by coordinate descent with a golden-section search
// per factor in log space, each factor within [0.02, 1]. Each run is
// captured once; a trial re-schedules its step. Reported: the factors
// before and after, each run's error before and after, and its
// leave-one-out error (the run's error under the factors fitted without
// it). N runs fix at most N factors. See docs/planner.md.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_DRIVER_PLANFIT_H
#define KILN_DRIVER_PLANFIT_H

#include "kiln/Planner/TargetProfile.h"

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

namespace kiln {

struct PublishedRuns;

/// An efficiency factor a fit may move (TargetProfile::Efficiency).
enum class EfficiencyFactor { Matmul, Attention, Vector, Memory, Collective };

/// "matmul,collective" as factors; throws kiln::Error naming an unknown or
/// repeated one.
std::vector<EfficiencyFactor> parseEfficiencyFactors(const std::string &list);
const char *efficiencyFactorName(EfficiencyFactor factor);

struct EfficiencyFit {
  std::string target, targetSource;
  std::vector<EfficiencyFactor> factors;
  TargetProfile::Efficiency before, after;
  struct Run {
    std::string name;
    /// The figure fitted on ("tokens_per_second_per_device" or
    /// "step_seconds"), published, and its error before and after.
    std::string figure;
    double published = 0, errorBefore = 0, errorAfter = 0;
    /// The error under the factors fitted without this run; none when it
    /// is the only run.
    std::optional<double> leaveOneOut;
  };
  std::vector<Run> runs;
  /// Root mean square of the log errors.
  double rmsBefore = 0, rmsAfter = 0;
  double seconds = 0;
};

/// Fits `factors` of `target` (a built-in name or a profile file) to the
/// checked runs of `published` planned on it. Throws kiln::Error when no
/// checked run uses the target, when there are more factors than runs, or
/// for a run the planner refuses.
EfficiencyFit fitEfficiency(const PublishedRuns &published, const std::string &target,
                            const std::vector<EfficiencyFactor> &factors);

std::string formatFit(const EfficiencyFit &fit);
nlohmann::json fitToJson(const EfficiencyFit &fit);

/// The target's profile JSON with the fitted factors and their provenance
/// in "sources" (what kiln plan --fit -o writes).
std::string fittedProfileJson(const EfficiencyFit &fit);

} // namespace kiln

#endif // KILN_DRIVER_PLANFIT_H
