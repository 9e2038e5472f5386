//===- PlanValidation.cpp - kiln plan --validate --------------------------===//

#include "kiln/Driver/PlanValidation.h"
#include "kiln/Driver/LayoutSearch.h"
#include "kiln/Driver/Planning.h"
#include "kiln/Support/Error.h"
#include "kiln/Support/Json.h"
#include "kiln/Support/ParallelFor.h"
#include "kiln/Support/Seconds.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

using json = nlohmann::json;

namespace kiln {
namespace {

/// The figures a run may publish, in report order, with how the plan gives
/// each (`plan`, the run's devices) and how it prints.
struct FigureKind {
  const char *name;
  const char *label;
  double (*planned)(const StepPlan &plan, int64_t devices);
  const char *format;
};

const FigureKind kFigures[] = {
    {"tokens_per_second_per_device", "tokens/s per device",
     [](const StepPlan &p, int64_t devices) {
       return double(p.setting.tokensPerStep) / p.stepSeconds / double(devices);
     },
     "{:.1f}"},
    {"step_seconds", "step time (s)", [](const StepPlan &p, int64_t) { return p.stepSeconds; },
     "{:.3f}"},
    {"mfu", "MFU, torchtitan's count", [](const StepPlan &p, int64_t) { return p.mfu; },
     "{:.4f}"},
    // The plan's MFU at the same throughput under the older count.
    {"mfu_torchtitan_before_1923", "MFU, torchtitan pre-1923",
     [](const StepPlan &p, int64_t) {
       return p.mfu * p.setting.torchtitanBefore1923FlopsPerToken / p.setting.flopsPerToken;
     },
     "{:.4f}"},
    {"mfu_nxdt", "MFU, NxDT's count", [](const StepPlan &p, int64_t) { return p.mfuNxdt; },
     "{:.4f}"},
    {"memory_gib_per_device", "memory per device (GiB)",
     [](const StepPlan &p, int64_t) {
       return memoryGibPerDevice(p.deviceBytes, p.target);
     },
     "{:.2f}"},
};

const FigureKind *figureKind(const std::string &name) {
  for (const FigureKind &kind : kFigures)
    if (name == kind.name)
      return &kind;
  return nullptr;
}

std::string figureNames() {
  std::string names;
  for (const FigureKind &kind : kFigures)
    names += (names.empty() ? "" : ", ") + std::string(kind.name);
  return names;
}

/// A positive number at `field` of `object`.
double positive(const JsonObject &object, const std::string &field) {
  double value = object.getNumber(field);
  if (!(value > 0) || !std::isfinite(value))
    fail("{}: '{}' must be a positive number, got {}", object.source(), field, value);
  return value;
}

PublishedRun parseRun(const JsonObject &run) {
  PublishedRun out;
  out.name = run.getString("name");
  std::string where = run.source() + ": run '" + out.name + "'";
  JsonObject named(run.json(), where);
  out.source = named.getString("source");
  out.setting = named.getString("setting");
  out.layout = named.getString("layout");
  out.notes = named.has("notes") ? named.getString("notes") : "";
  out.checked = named.has("checked") ? named.getBool("checked") : true;
  out.fit = named.has("fit") ? named.getBool("fit") : true;
  out.devices = named.getInt("devices");
  if (out.devices < 1)
    fail("{}: 'devices' must be at least 1, got {}", where, out.devices);

  JsonObject plan(named.get("plan"), where + ", plan");
  out.target = plan.getString("target");
  out.nodes = plan.getInt("nodes");
  const json &config = plan.get("config");
  if (!config.is_array())
    fail("{}, plan: 'config' must be an array of --section.key=value words", where);
  for (const json &word : config) {
    if (!word.is_string())
      fail("{}, plan: 'config' must be an array of --section.key=value words, got {}", where,
           briefJson(word));
    out.config.push_back(word.get<std::string>());
  }

  JsonObject published(named.get("published"), where + ", published");
  JsonObject tolerance(named.get("tolerance"), where + ", tolerance");
  if (published.json().empty())
    fail("{}: 'published' holds no figure (known: {})", where, figureNames());
  for (const auto &[name, value] : published.json().items())
    if (!figureKind(name))
      fail("{}, published: '{}' is not a figure kiln plan gives (known: {})", where, name,
           figureNames());
  for (const auto &[name, value] : tolerance.json().items())
    if (!published.has(name))
      fail("{}, tolerance: '{}' has no published figure", where, name);
  for (const FigureKind &kind : kFigures)
    if (published.has(kind.name)) {
      out.published[kind.name] = positive(published, kind.name);
      out.tolerance[kind.name] = positive(tolerance, kind.name);
    }
  return out;
}

ValidatedRun validateRun(const PublishedRun &run, const std::string &where) {
  ValidatedRun out;
  out.published = run;
  Clock::time_point start = Clock::now();
  StepPlan planned = planPublishedRun(run, where);
  out.planningSeconds = secondsSince(start);
  for (const FigureKind &kind : kFigures) {
    auto published = run.published.find(kind.name);
    if (published == run.published.end())
      continue;
    ValidatedFigure figure;
    figure.name = kind.name;
    figure.published = published->second;
    figure.tolerance = run.tolerance.at(kind.name);
    figure.planned = kind.planned(planned, run.devices);
    figure.error = figure.planned / figure.published - 1;
    out.figures.push_back(figure);
  }
  return out;
}

} // namespace

double memoryGibPerDevice(int64_t deviceBytes, const TargetProfile &target) {
  return double(deviceBytes) * double(target.ranksPerDevice) / double(int64_t(1) << 30);
}

bool ValidatedFigure::withinTolerance() const { return std::fabs(error) <= tolerance; }

bool PlanValidation::withinTolerances() const {
  for (const ValidatedRun &run : runs)
    for (const ValidatedFigure &figure : run.figures)
      if (run.published.checked && !figure.withinTolerance())
        return false;
  return true;
}

PublishedRuns parsePublishedRuns(const std::string &text, const std::string &source) {
  JsonObject document = JsonObject::parse(text, source);
  PublishedRuns out;
  out.source = source;
  out.target = positive(document, "target");
  const json &runs = document.get("runs");
  if (!runs.is_array() || runs.empty())
    fail("{}: 'runs' must be a non-empty array of runs", source);
  for (size_t i = 0; i < runs.size(); ++i) {
    std::string where = fmt::format("{}: runs[{}]", source, i);
    if (!runs[i].is_object())
      fail("{} must be an object", where);
    out.runs.push_back(parseRun(JsonObject(runs[i], where)));
  }
  return out;
}

StepPlan planPublishedRun(const PublishedRun &run, const std::string &where,
                          const TargetProfile *target) {
  try {
    TrainConfig train = TrainConfig::load("", run.config);
    return planTrainingRun(train, target ? *target : loadTargetProfile(run.target, thisMachine()),
                           run.nodes);
  } catch (const Error &e) {
    fail("{}: run '{}': the plan failed: {}", where, run.name, e.what());
  }
}

double plannedFigure(const std::string &figure, const StepPlan &plan, const PublishedRun &run) {
  const FigureKind *kind = figureKind(figure);
  if (!kind)
    fail("plan: '{}' is not a figure kiln plan gives (known: {})", figure, figureNames());
  return kind->planned(plan, run.devices);
}

PlanValidation validatePlanner(const PublishedRuns &published) {
  PlanValidation validation;
  validation.target = published.target;
  // The runs are independent (each planned in its own MLIR context), as the
  // layout search's candidates: as many workers. A run on a target that
  // times GEMMs on this machine as it plans (the cpu profile) would be
  // disturbed by the others: one worker then.
  int64_t workers = kMaxSearchWorkers;
  for (const PublishedRun &run : published.runs) {
    try {
      workers = std::min(workers, run.target == "cpu" ? 1
                                                      : defaultPlanningWorkers(loadTargetProfile(
                                                            run.target, thisMachine())));
    } catch (const Error &) {
      // The run's own planning reports its target, naming the run.
    }
  }
  validation.runs.resize(published.runs.size());
  parallelFor(published.runs.size(), workers, [&](size_t i) {
    validation.runs[i] =
        validateRun(published.runs[i], fmt::format("{}: runs[{}]", published.source, i));
  });
  return validation;
}

std::string formatValidation(const PlanValidation &validation) {
  std::string out;
  int64_t figures = 0, outside = 0, missed = 0, unchecked = 0;
  for (const ValidatedRun &run : validation.runs) {
    const PublishedRun &p = run.published;
    out += fmt::format("{}{}\n  source: {}\n  setting: {}\n  Kiln layout: {}\n", p.name,
                       !p.checked ? " (not checked)"
                       : !p.fit   ? " (checked, left out of kiln plan --fit)"
                                  : "",
                       p.source, p.setting, p.layout);
    unchecked += !run.published.checked;
    for (const ValidatedFigure &figure : run.figures) {
      const FigureKind &kind = *figureKind(figure.name);
      bool within = figure.withinTolerance();
      bool onTarget = std::fabs(figure.error) <= validation.target;
      if (run.published.checked) {
        ++figures;
        outside += !within;
        missed += !onTarget;
      }
      out += fmt::format("  {:<24} published {:>10}  planned {:>10}  {:>+7.1f}%  tolerance "
                         "{:.0f}%{}  {}\n",
                         kind.label, fmt::format(fmt::runtime(kind.format), figure.published),
                         fmt::format(fmt::runtime(kind.format), figure.planned),
                         100 * figure.error, 100 * figure.tolerance,
                         onTarget ? "" : fmt::format(" (target {:.0f}%: not yet)",
                                                     100 * validation.target),
                         !run.published.checked ? "not checked" : within ? "ok" : "OUTSIDE");
    }
    if (!run.published.notes.empty())
      out += fmt::format("  notes: {}\n", run.published.notes);
    out += fmt::format("  planned in {:.2f} s\n", run.planningSeconds);
  }
  out += fmt::format("{} run{}, {} figure{} checked: {}; {} within the {:.0f}% target{}\n",
                     validation.runs.size() - unchecked,
                     validation.runs.size() - unchecked == 1 ? "" : "s", figures,
                     figures == 1 ? "" : "s",
                     outside == 0 ? "all within their tolerances"
                                  : fmt::format("{} OUTSIDE their tolerances", outside),
                     figures - missed, 100 * validation.target,
                     unchecked ? fmt::format("; {} run{} not checked (not expressible yet)",
                                             unchecked, unchecked == 1 ? "" : "s")
                               : "");
  return out;
}

json validationToJson(const PlanValidation &validation) {
  json runs = json::array();
  for (const ValidatedRun &run : validation.runs) {
    json figures = json::object();
    for (const ValidatedFigure &f : run.figures)
      figures[f.name] = {{"published", f.published},
                         {"planned", f.planned},
                         {"error", f.error},
                         {"tolerance", f.tolerance},
                         {"within_tolerance", f.withinTolerance()}};
    runs.push_back({{"name", run.published.name},
                    {"source", run.published.source},
                    {"checked", run.published.checked},
                    {"fit", run.published.fit},
                    {"figures", figures},
                    {"planning_seconds", run.planningSeconds}});
  }
  return {{"target", validation.target},
          {"within_tolerances", validation.withinTolerances()},
          {"runs", runs}};
}

} // namespace kiln
