//===- PlanFit.h - kiln plan --fit: a target's factors from published runs -*- C++ -*-===//
//
// One set of factors per target, fitted rather than assumed: the parameters
// named (the efficiency factors matmul, attention, vector, memory,
// collective; the collective latencies per ring step inside and between
// nodes) moved to minimize the sum of squared log errors of the planned
// tokens/s per device (or step time) over every checked published run on
// that target (PlanValidation.h), by coordinate descent with a
// golden-section search per parameter in log space, each within its range
// (a factor in [0.02, 1], a latency in [0.1, 100] us). The allocator's
// overhead (TargetProfile::allocatorOverhead) is fitted the same way on the
// published memory per device. Each run is
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

/// A profile parameter a fit may move: an efficiency factor
/// (TargetProfile::Efficiency) or a link's latency per ring step.
enum class FitParameter {
  Matmul,
  Attention,
  Vector,
  Memory,
  Collective,
  IntraNodeLatency,
  InterNodeLatency,
  /// Fitted on the published memory per device instead of the throughput.
  AllocatorOverhead
};

/// "matmul,inter_node_latency" as parameters; throws kiln::Error naming an
/// unknown or repeated one.
std::vector<FitParameter> parseFitParameters(const std::string &list);
const char *fitParameterName(FitParameter parameter);

struct ProfileFit {
  std::string target, targetSource;
  std::vector<FitParameter> factors;
  /// The profile as shipped, and with the fitted values.
  TargetProfile before, after;
  struct Run {
    std::string name;
    /// The figure fitted on ("tokens_per_second_per_device",
    /// "step_seconds" or "memory_gib_per_device"), published, and its error
    /// before and after.
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
ProfileFit fitProfile(const PublishedRuns &published, const std::string &target,
                            const std::vector<FitParameter> &factors);

std::string formatFit(const ProfileFit &fit);
nlohmann::json fitToJson(const ProfileFit &fit);

/// The target's profile JSON with the fitted values and their provenance in
/// "sources" (what kiln plan --fit -o writes).
std::string fittedProfileJson(const ProfileFit &fit);

} // namespace kiln

#endif // KILN_DRIVER_PLANFIT_H
