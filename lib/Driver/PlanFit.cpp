//===- PlanFit.cpp - kiln plan --fit --------------------------------------===//

#include "kiln/Driver/PlanFit.h"
#include "kiln/Driver/PlanValidation.h"
#include "kiln/Driver/Planning.h"
#include "kiln/Planner/Precision.h"
#include "kiln/Planner/StepSchedule.h"
#include "kiln/Support/Error.h"
#include "kiln/Support/Json.h"
#include "kiln/Support/Seconds.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

using json = nlohmann::json;

namespace kiln {
namespace {

constexpr EfficiencyFactor kAllFactors[] = {EfficiencyFactor::Matmul, EfficiencyFactor::Attention,
                                            EfficiencyFactor::Vector, EfficiencyFactor::Memory,
                                            EfficiencyFactor::Collective};
/// The range a fitted factor stays in: a fraction of peak, and not so small
/// that a fit could explain a run by a device doing nearly nothing.
constexpr double kLowest = 0.02, kHighest = 1.0;

double &factorOf(TargetProfile::Efficiency &e, EfficiencyFactor factor) {
  switch (factor) {
  case EfficiencyFactor::Matmul:
    return e.matmul;
  case EfficiencyFactor::Attention:
    return e.attention;
  case EfficiencyFactor::Vector:
    return e.vector;
  case EfficiencyFactor::Memory:
    return e.memory;
  case EfficiencyFactor::Collective:
    return e.collective;
  }
  return e.matmul;
}

/// A published run captured once and re-scheduled per trial.
struct FitRun {
  const PublishedRun *run;
  std::string figure;
  double published;
  CapturedRun captured;
  std::unique_ptr<ValuePrecision> precision;

  /// log(planned / published) under `target`.
  double logError(const TargetProfile &target) const {
    double seconds = scheduleStep(captured.step, target, *precision).seconds;
    double planned = figure == "step_seconds"
                         ? seconds
                         : double(captured.setting.tokensPerStep) / seconds / double(run->devices);
    return std::log(planned / published);
  }
};

double loss(const std::vector<const FitRun *> &runs, const TargetProfile &target) {
  double sum = 0;
  for (const FitRun *r : runs) {
    double e = r->logError(target);
    sum += e * e;
  }
  return sum;
}

/// Coordinate descent from `start`: each factor in turn by a golden-section
/// search of its log in [kLowest, kHighest] (16 steps: to 0.2% of the
/// factor), kept only where it lowers the loss; at most `sweeps` sweeps,
/// until one lowers the loss by less than 1e-6.
TargetProfile::Efficiency minimize(const std::vector<const FitRun *> &runs,
                                   const TargetProfile &base,
                                   const std::vector<EfficiencyFactor> &factors,
                                   TargetProfile::Efficiency start, int sweeps) {
  TargetProfile trial = base;
  trial.efficiency = start;
  double best = loss(runs, trial);
  const double phi = (std::sqrt(5.0) - 1) / 2;
  for (int sweep = 0; sweep < sweeps; ++sweep) {
    double before = best;
    for (EfficiencyFactor factor : factors) {
      double &value = factorOf(trial.efficiency, factor);
      double kept = value;
      auto at = [&](double logValue) {
        value = std::exp(logValue);
        return loss(runs, trial);
      };
      double lo = std::log(kLowest), hi = std::log(kHighest);
      double a = hi - phi * (hi - lo), b = lo + phi * (hi - lo);
      double fa = at(a), fb = at(b);
      for (int i = 0; i < 16; ++i) {
        if (fa < fb) {
          hi = b;
          b = a;
          fb = fa;
          a = hi - phi * (hi - lo);
          fa = at(a);
        } else {
          lo = a;
          a = b;
          fa = fb;
          b = lo + phi * (hi - lo);
          fb = at(b);
        }
      }
      double x = fa < fb ? a : b, fx = std::min(fa, fb);
      if (fx < best) {
        value = std::exp(x);
        best = fx;
      } else {
        value = kept;
      }
    }
    if (before - best < 1e-6)
      break;
  }
  return trial.efficiency;
}

double relativeError(double logError) { return std::exp(logError) - 1; }

} // namespace

const char *efficiencyFactorName(EfficiencyFactor factor) {
  switch (factor) {
  case EfficiencyFactor::Matmul:
    return "matmul";
  case EfficiencyFactor::Attention:
    return "attention";
  case EfficiencyFactor::Vector:
    return "vector";
  case EfficiencyFactor::Memory:
    return "memory";
  case EfficiencyFactor::Collective:
    return "collective";
  }
  return "?";
}

std::vector<EfficiencyFactor> parseEfficiencyFactors(const std::string &list) {
  std::vector<EfficiencyFactor> out;
  std::string known;
  for (EfficiencyFactor f : kAllFactors)
    known += (known.empty() ? "" : ", ") + std::string(efficiencyFactorName(f));
  size_t start = 0;
  while (start <= list.size()) {
    size_t comma = list.find(',', start);
    std::string name = list.substr(start, comma == std::string::npos ? comma : comma - start);
    const EfficiencyFactor *found = nullptr;
    for (const EfficiencyFactor &f : kAllFactors)
      if (name == efficiencyFactorName(f))
        found = &f;
    if (!found)
      fail("plan: --fit-factors: '{}' is not an efficiency factor (known: {})", name, known);
    if (std::find(out.begin(), out.end(), *found) != out.end())
      fail("plan: --fit-factors: '{}' is named twice", name);
    out.push_back(*found);
    if (comma == std::string::npos)
      break;
    start = comma + 1;
  }
  return out;
}

EfficiencyFit fitEfficiency(const PublishedRuns &published, const std::string &target,
                            const std::vector<EfficiencyFactor> &factors) {
  Clock::time_point start = Clock::now();
  EfficiencyFit fit;
  fit.target = target;
  fit.factors = factors;
  std::string text = targetProfileText(target, fit.targetSource);
  TargetProfile profile = loadTargetProfile(target, thisMachine());
  fit.before = profile.efficiency;

  std::vector<std::unique_ptr<FitRun>> runs;
  for (size_t i = 0; i < published.runs.size(); ++i) {
    const PublishedRun &run = published.runs[i];
    if (!run.checked || run.target != target)
      continue;
    auto r = std::make_unique<FitRun>();
    r->run = &run;
    r->figure = run.published.count("tokens_per_second_per_device") ? "tokens_per_second_per_device"
                                                                    : "step_seconds";
    if (!run.published.count(r->figure))
      fail("{}: run '{}' publishes neither tokens/s per device nor a step time to fit on",
           published.source, run.name);
    r->published = run.published.at(r->figure);
    try {
      r->captured = captureForPlanning(TrainConfig::load("", run.config), profile, run.nodes);
    } catch (const Error &e) {
      fail("{}: runs[{}]: run '{}': the plan failed: {}", published.source, i, run.name, e.what());
    }
    r->precision = std::make_unique<ValuePrecision>(r->captured.step, profile.precision);
    runs.push_back(std::move(r));
  }
  if (runs.empty())
    fail("plan: --fit {}: no checked run of {} is planned on it", target, published.source);
  if (factors.size() > runs.size())
    fail("plan: --fit {}: {} run{} fix{} at most {} factor{}, not the {} named "
         "(--fit-factors)",
         target, runs.size(), runs.size() == 1 ? "" : "s", runs.size() == 1 ? "es" : "",
         runs.size(), runs.size() == 1 ? "" : "s", factors.size());

  std::vector<const FitRun *> all;
  for (const auto &r : runs)
    all.push_back(r.get());
  fit.after = minimize(all, profile, factors, profile.efficiency, /*sweeps=*/4);
  TargetProfile before = profile, after = profile;
  after.efficiency = fit.after;
  double sumBefore = 0, sumAfter = 0;
  for (size_t k = 0; k < runs.size(); ++k) {
    EfficiencyFit::Run out;
    out.name = runs[k]->run->name;
    out.figure = runs[k]->figure;
    out.published = runs[k]->published;
    double eb = runs[k]->logError(before), ea = runs[k]->logError(after);
    sumBefore += eb * eb;
    sumAfter += ea * ea;
    out.errorBefore = relativeError(eb);
    out.errorAfter = relativeError(ea);
    if (runs.size() > 1 && factors.size() <= runs.size() - 1) {
      std::vector<const FitRun *> others;
      for (size_t j = 0; j < runs.size(); ++j)
        if (j != k)
          others.push_back(runs[j].get());
      TargetProfile without = profile;
      without.efficiency = minimize(others, profile, factors, fit.after, /*sweeps=*/4);
      out.leaveOneOut = relativeError(runs[k]->logError(without));
    }
    fit.runs.push_back(out);
  }
  fit.rmsBefore = std::sqrt(sumBefore / double(runs.size()));
  fit.rmsAfter = std::sqrt(sumAfter / double(runs.size()));
  fit.seconds = secondsSince(start);
  return fit;
}

std::string formatFit(const EfficiencyFit &fit) {
  std::string names;
  for (EfficiencyFactor f : fit.factors)
    names += (names.empty() ? "" : ", ") + std::string(efficiencyFactorName(f));
  std::string out = fmt::format(
      "fit of {}'s efficiency ({}) to {} published run{}: least squares on the log error of "
      "tokens/s per device\n",
      fit.target, names, fit.runs.size(), fit.runs.size() == 1 ? "" : "s");
  out += "  factor        before     after\n";
  for (EfficiencyFactor f : kAllFactors) {
    TargetProfile::Efficiency b = fit.before, a = fit.after;
    bool moved = std::find(fit.factors.begin(), fit.factors.end(), f) != fit.factors.end();
    double value = factorOf(a, f);
    // A factor pinned at its bound: the runs want more (or less) of it than
    // a fraction of peak can give, so the error lies in another part of the model.
    const char *bound = !moved                     ? ""
                        : value >= kHighest * 0.99 ? ", at its upper bound 1: the runs want more"
                        : value <= kLowest * 1.01  ? ", at its lower bound 0.02"
                                                   : "";
    out += fmt::format("  {:<12} {:>7.4f}   {:>7.4f}{}{}{}\n", efficiencyFactorName(f),
                       factorOf(b, f), value, moved ? "  (fitted" : "", bound, moved ? ")" : "");
  }
  out += fmt::format("  {:<44} {:>11} {:>8} {:>8} {:>14}\n", "run", "published", "before", "after",
                     "leave-one-out");
  for (const EfficiencyFit::Run &r : fit.runs)
    out += fmt::format("  {:<44} {:>11.1f} {:>+7.1f}% {:>+7.1f}% {:>14}\n", r.name, r.published,
                       100 * r.errorBefore, 100 * r.errorAfter,
                       r.leaveOneOut ? fmt::format("{:+.1f}%", 100 * *r.leaveOneOut)
                                     : std::string("-"));
  out += fmt::format("  rms log error: before {:.4f}, after {:.4f}\n", fit.rmsBefore, fit.rmsAfter);
  if (fit.runs.size() <= fit.factors.size())
    out += fmt::format("  {} run{} and {} factor{}: the fit can match every run; no run is "
                       "left to test it (leave-one-out needs more runs than factors)\n",
                       fit.runs.size(), fit.runs.size() == 1 ? "" : "s", fit.factors.size(),
                       fit.factors.size() == 1 ? "" : "s");
  out += fmt::format("fitted in {:.1f} s\n", fit.seconds);
  return out;
}

json fitToJson(const EfficiencyFit &fit) {
  json factors = json::object(), before = json::object(), after = json::object();
  for (EfficiencyFactor f : kAllFactors) {
    TargetProfile::Efficiency b = fit.before, a = fit.after;
    before[efficiencyFactorName(f)] = factorOf(b, f);
    after[efficiencyFactorName(f)] = factorOf(a, f);
  }
  json fitted = json::array();
  for (EfficiencyFactor f : fit.factors)
    fitted.push_back(efficiencyFactorName(f));
  json runs = json::array();
  for (const EfficiencyFit::Run &r : fit.runs) {
    json run{{"name", r.name},
             {"figure", r.figure},
             {"published", r.published},
             {"error_before", r.errorBefore},
             {"error_after", r.errorAfter}};
    run["leave_one_out"] = r.leaveOneOut ? json(*r.leaveOneOut) : json(nullptr);
    runs.push_back(run);
  }
  return {{"target", fit.target},
          {"fitted", fitted},
          {"before", before},
          {"after", after},
          {"runs", runs},
          {"rms_log_error_before", fit.rmsBefore},
          {"rms_log_error_after", fit.rmsAfter},
          {"seconds", fit.seconds}};
}

std::string fittedProfileJson(const EfficiencyFit &fit) {
  std::string source;
  json profile = parseJson(targetProfileText(fit.target, source), source);
  std::string runs, names;
  for (const EfficiencyFit::Run &r : fit.runs)
    runs += (runs.empty() ? "" : "; ") + r.name;
  for (EfficiencyFactor f : fit.factors) {
    TargetProfile::Efficiency a = fit.after;
    profile["efficiency"][efficiencyFactorName(f)] = factorOf(a, f);
    names += (names.empty() ? "" : ", ") + std::string(efficiencyFactorName(f));
  }
  std::string was = profile["sources"].value("efficiency", std::string());
  profile["sources"]["efficiency"] = fmt::format(
      "{} fitted by kiln plan --fit (least squares on the log error of tokens/s per device, "
      "rms {:.4f} -> {:.4f}) to the published runs: {}. The rest as before: {}",
      names, fit.rmsBefore, fit.rmsAfter, runs, was);
  return profile.dump(2) + "\n";
}

} // namespace kiln
