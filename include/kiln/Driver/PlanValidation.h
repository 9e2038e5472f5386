//===- PlanValidation.h - kiln plan --validate: plans against published runs -*- C++ -*-===//
//
// The planner is only as good as its agreement with real runs. Published
// runs are data (targets/published/runs.json, compiled in): each with its
// source, its setting, the Kiln run config that expresses it (target,
// nodes, --section.key=value words) and, per published figure (tokens/s per
// device, step time, memory per device), the tolerance the test asserts.
// Validation plans every run as `kiln plan` would and reports each figure's
// error against its tolerance and the file's target. See docs/planner.md.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_DRIVER_PLANVALIDATION_H
#define KILN_DRIVER_PLANVALIDATION_H

#include "kiln/Planner/StepPlan.h"

#include <nlohmann/json.hpp>

#include <map>
#include <string>
#include <vector>

namespace kiln {

/// One run of the published-runs document, as the file says it.
struct PublishedRun {
  std::string name, source, setting, layout, notes;
  /// False for a run Kiln cannot express yet: planned and reported, not
  /// asserted (nor fitted).
  bool checked = true;
  /// False for a run whose figures rest on what Kiln does not model (Float8
  /// matmuls, a layout only near the published one): checked against its
  /// tolerance, left out of kiln plan --fit so that it does not bend a
  /// target's factors.
  bool fit = true;
  /// The plan: a built-in target or a profile file, nodes, and the run
  /// config as --section.key=value words.
  std::string target;
  int64_t nodes = 1;
  std::vector<std::string> config;
  /// The devices the published figures are per (GPUs, chips, cores).
  int64_t devices = 1;
  /// Figure name -> published value, and -> tolerance.
  std::map<std::string, double> published, tolerance;
};

struct PublishedRuns {
  std::string source;
  double target = 0;
  std::vector<PublishedRun> runs;
};

/// Reads the published-runs document `text` (from `source`). Throws
/// kiln::Error naming the source, the run and the field for a document that
/// is not one.
PublishedRuns parsePublishedRuns(const std::string &text, const std::string &source);

/// The plan of `run` (`target` replaces the run's own when given). Throws
/// kiln::Error naming the run for a config the planner refuses.
StepPlan planPublishedRun(const PublishedRun &run, const std::string &where,
                          const TargetProfile *target = nullptr);

/// A rank's `deviceBytes` as memory per device, in GiB (the published
/// memory figure).
double memoryGibPerDevice(int64_t deviceBytes, const TargetProfile &target);

/// A figure of `plan` as `run` publishes it (per its devices).
double plannedFigure(const std::string &figure, const StepPlan &plan, const PublishedRun &run);

/// One published figure against the plan of its run.
struct ValidatedFigure {
  /// "tokens_per_second_per_device", "step_seconds", "memory_gib_per_device".
  std::string name;
  double published = 0, planned = 0;
  /// planned / published - 1.
  double error = 0;
  double tolerance = 0;
  bool withinTolerance() const;
};

struct ValidatedRun {
  PublishedRun published;
  std::vector<ValidatedFigure> figures;
  double planningSeconds = 0;
};

struct PlanValidation {
  /// The error every figure should reach (the file's "target").
  double target = 0;
  std::vector<ValidatedRun> runs;
  /// Every checked run's figures within their tolerances.
  bool withinTolerances() const;
};

/// targets/published/runs.json as compiled in.
const std::string &builtinPublishedRuns();

/// Plans every run of `published`. Throws kiln::Error naming the run for a
/// config the planner refuses.
PlanValidation validatePlanner(const PublishedRuns &published);

/// The report: per run its setting and each figure published vs planned,
/// the error, the tolerance and the target; then the totals.
std::string formatValidation(const PlanValidation &validation);
nlohmann::json validationToJson(const PlanValidation &validation);

} // namespace kiln

#endif // KILN_DRIVER_PLANVALIDATION_H
