//===- PlanFit.cpp - kiln plan --fit --------------------------------------===//

#include "kiln/Driver/PlanFit.h"
#include "kiln/Driver/PlanValidation.h"
#include "kiln/Driver/Planning.h"
#include "kiln/Planner/MemoryPlan.h"
#include "kiln/Planner/Precision.h"
#include "kiln/Planner/StepSchedule.h"
#include "kiln/Support/Error.h"
#include "kiln/Support/Json.h"
#include "kiln/Support/Seconds.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

using json = nlohmann::json;

namespace kiln {
namespace {

/// Each parameter a fit may move: its name, where the profile JSON holds it
/// and its range (a factor is a fraction of peak, and not so small that a
/// fit could explain a run by a device doing nearly nothing; a latency per
/// ring step between 0.1 and 100 us).
struct ParameterInfo {
  FitParameter parameter;
  const char *name;
  std::vector<std::string> path;
  double lowest, highest;
  /// Fitted on the memory per device rather than the throughput.
  bool memory = false;
};

const std::vector<ParameterInfo> &parameters() {
  static const std::vector<ParameterInfo> all = {
      {FitParameter::Matmul, "matmul", {"efficiency", "matmul"}, 0.02, 1.0},
      {FitParameter::Attention, "attention", {"efficiency", "attention"}, 0.02, 1.0},
      {FitParameter::Vector, "vector", {"efficiency", "vector"}, 0.02, 1.0},
      {FitParameter::Memory, "memory", {"efficiency", "memory"}, 0.02, 1.0},
      {FitParameter::Collective, "collective", {"efficiency", "collective"}, 0.02, 1.0},
      {FitParameter::IntraNodeLatency,
       "intra_node_latency",
       {"interconnect", "intra_node", "latency_seconds"},
       1e-7,
       1e-4},
      {FitParameter::InterNodeLatency,
       "inter_node_latency",
       {"interconnect", "inter_node", "latency_seconds"},
       1e-7,
       1e-4},
      {FitParameter::AllocatorOverhead,
       "allocator_overhead",
       {"allocator_overhead"},
       1e-3,
       4.0,
       /*memory=*/true},
  };
  return all;
}

const ParameterInfo &infoOf(FitParameter parameter) {
  for (const ParameterInfo &info : parameters())
    if (info.parameter == parameter)
      return info;
  return parameters().front();
}

/// The profile's field of `parameter` (a const one for a const profile).
template <typename Profile> auto &parameterField(Profile &t, FitParameter parameter) {
  switch (parameter) {
  case FitParameter::Matmul:
    return t.efficiency.matmul;
  case FitParameter::Attention:
    return t.efficiency.attention;
  case FitParameter::Vector:
    return t.efficiency.vector;
  case FitParameter::Memory:
    return t.efficiency.memory;
  case FitParameter::Collective:
    return t.efficiency.collective;
  case FitParameter::IntraNodeLatency:
    return t.intraNode.latencySeconds;
  case FitParameter::InterNodeLatency:
    return t.interNode.latencySeconds;
  case FitParameter::AllocatorOverhead:
    return t.allocatorOverhead;
  }
  return t.efficiency.matmul;
}

double &parameterOf(TargetProfile &t, FitParameter parameter) {
  return parameterField(t, parameter);
}

double valueOf(const TargetProfile &t, FitParameter parameter) {
  return parameterField(t, parameter);
}

/// A published run captured once and re-scheduled per trial.
struct FitRun {
  const PublishedRun *run;
  std::string figure;
  double published;
  CapturedRun captured;
  std::unique_ptr<ValuePrecision> precision;

  /// The live peak per rank (memory fits only).
  int64_t peakBytes = 0;

  /// log(planned / published) under `target`.
  double logError(const TargetProfile &target) const {
    if (figure == "memory_gib_per_device")
      return std::log(memoryGibPerDevice(devicePeakBytes(peakBytes, target), target) /
                      published);
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

/// Coordinate descent from `start`: each parameter in turn by a
/// golden-section search of its log within its range (16 steps: to 0.2%
/// of a factor), kept only where it lowers the loss; at most `sweeps`
/// sweeps, until one lowers the loss by less than 1e-6.
TargetProfile minimize(const std::vector<const FitRun *> &runs, const TargetProfile &start,
                       const std::vector<FitParameter> &fitted, int sweeps) {
  TargetProfile trial = start;
  double best = loss(runs, trial);
  const double phi = (std::sqrt(5.0) - 1) / 2;
  for (int sweep = 0; sweep < sweeps; ++sweep) {
    double before = best;
    for (FitParameter parameter : fitted) {
      const ParameterInfo &info = infoOf(parameter);
      double &value = parameterOf(trial, parameter);
      double kept = value;
      auto at = [&](double logValue) {
        value = std::exp(logValue);
        return loss(runs, trial);
      };
      double lo = std::log(info.lowest), hi = std::log(info.highest);
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
  return trial;
}

double relativeError(double logError) { return std::exp(logError) - 1; }

} // namespace

const char *fitParameterName(FitParameter parameter) { return infoOf(parameter).name; }

std::vector<FitParameter> parseFitParameters(const std::string &list) {
  std::vector<FitParameter> out;
  std::string known;
  for (const ParameterInfo &info : parameters())
    known += (known.empty() ? "" : ", ") + std::string(info.name);
  size_t start = 0;
  while (true) {
    size_t comma = list.find(',', start);
    std::string name = list.substr(start, comma == std::string::npos ? comma : comma - start);
    const ParameterInfo *found = nullptr;
    for (const ParameterInfo &info : parameters())
      if (name == info.name)
        found = &info;
    if (!found)
      fail("plan: --fit-factors: '{}' is not a parameter a fit moves (known: {})", name, known);
    if (std::find(out.begin(), out.end(), found->parameter) != out.end())
      fail("plan: --fit-factors: '{}' is named twice", name);
    out.push_back(found->parameter);
    if (comma == std::string::npos)
      break;
    start = comma + 1;
  }
  return out;
}

ProfileFit fitProfile(const PublishedRuns &published, const std::string &target,
                            const std::vector<FitParameter> &factors) {
  Clock::time_point start = Clock::now();
  ProfileFit fit;
  fit.target = target;
  fit.factors = factors;
  targetProfileText(target, fit.targetSource);
  TargetProfile profile = loadTargetProfile(target, thisMachine());
  fit.before = profile;

  // Memory and time are fitted apart: each on its own figure.
  bool memory = infoOf(factors.front()).memory;
  for (FitParameter f : factors)
    if (infoOf(f).memory != memory)
      fail("plan: --fit-factors: {} is fitted on the memory per device and {} on the "
           "throughput; fit them apart",
           infoOf(memory ? factors.front() : f).name, infoOf(memory ? f : factors.front()).name);
  std::vector<std::unique_ptr<FitRun>> runs;
  for (size_t i = 0; i < published.runs.size(); ++i) {
    const PublishedRun &run = published.runs[i];
    if (!run.checked || !run.fit || run.target != target)
      continue;
    auto r = std::make_unique<FitRun>();
    r->run = &run;
    if (memory) {
      // Only the runs that publish their memory.
      r->figure = "memory_gib_per_device";
      if (!run.published.count(r->figure))
        continue;
    } else {
      r->figure = run.published.count("tokens_per_second_per_device")
                      ? "tokens_per_second_per_device"
                      : "step_seconds";
      if (!run.published.count(r->figure))
        fail("{}: run '{}' publishes neither tokens/s per device nor a step time to fit on",
             published.source, run.name);
    }
    r->published = run.published.at(r->figure);
    PrecisionPolicy precision;
    try {
      TrainConfig config = TrainConfig::load("", run.config);
      r->captured = captureForPlanning(config, profile, run.nodes);
      precision = targetForRun(config, profile).precision;
    } catch (const Error &e) {
      fail("{}: runs[{}]: run '{}': the plan failed: {}", published.source, i, run.name, e.what());
    }
    r->precision = std::make_unique<ValuePrecision>(r->captured.step, precision);
    if (memory)
      r->peakBytes = planMemory(r->captured.step, r->precision.get()).peakBytes;
    runs.push_back(std::move(r));
  }
  if (runs.empty())
    fail("plan: --fit {}: no checked run of {} is planned on it{}", target, published.source,
         memory ? " with its memory published" : "");
  if (factors.size() > runs.size())
    fail("plan: --fit {}: {} run{} fix{} at most {} factor{}, not the {} named "
         "(--fit-factors)",
         target, runs.size(), runs.size() == 1 ? "" : "s", runs.size() == 1 ? "es" : "",
         runs.size(), runs.size() == 1 ? "" : "s", factors.size());

  std::vector<const FitRun *> all;
  for (const auto &r : runs)
    all.push_back(r.get());
  fit.after = minimize(all, profile, factors, /*sweeps=*/4);
  const TargetProfile &before = fit.before, &after = fit.after;
  double sumBefore = 0, sumAfter = 0;
  for (size_t k = 0; k < runs.size(); ++k) {
    ProfileFit::Run out;
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
      TargetProfile without = minimize(others, fit.after, factors, /*sweeps=*/4);
      out.leaveOneOut = relativeError(runs[k]->logError(without));
    }
    fit.runs.push_back(out);
  }
  fit.rmsBefore = std::sqrt(sumBefore / double(runs.size()));
  fit.rmsAfter = std::sqrt(sumAfter / double(runs.size()));
  fit.seconds = secondsSince(start);
  return fit;
}

std::string formatFit(const ProfileFit &fit) {
  std::string names;
  for (FitParameter f : fit.factors)
    names += (names.empty() ? "" : ", ") + std::string(fitParameterName(f));
  std::string out = fmt::format(
      "fit of {}'s {} to {} published run{}: least squares on the log error of {} per "
      "device\n",
      fit.target, names, fit.runs.size(), fit.runs.size() == 1 ? "" : "s",
      infoOf(fit.factors.front()).memory ? "memory" : "tokens/s");
  out += "  parameter             before       after\n";
  for (const ParameterInfo &info : parameters()) {
    double before = valueOf(fit.before, info.parameter), value = valueOf(fit.after, info.parameter);
    bool moved =
        std::find(fit.factors.begin(), fit.factors.end(), info.parameter) != fit.factors.end();
    // A parameter pinned at a bound: no value in its range explains the
    // runs, so the error lies in another part of the model.
    std::string bound = !moved                          ? ""
                        : value >= info.highest * 0.99 ? ", at its upper bound"
                        : value <= info.lowest * 1.01  ? ", at its lower bound"
                                                       : "";
    out += fmt::format("  {:<20} {:>10.4g}  {:>10.4g}{}\n", info.name, before, value,
                       moved ? "  (fitted" + bound + ")" : "");
  }
  out += fmt::format("  {:<44} {:>11} {:>8} {:>8} {:>14}\n", "run", "published", "before",
                     "after", "leave-one-out");
  for (const ProfileFit::Run &r : fit.runs)
    out += fmt::format("  {:<44} {:>11.1f} {:>+7.1f}% {:>+7.1f}% {:>14}\n", r.name, r.published,
                       100 * r.errorBefore, 100 * r.errorAfter,
                       r.leaveOneOut ? fmt::format("{:+.1f}%", 100 * *r.leaveOneOut)
                                     : std::string("-"));
  out += fmt::format("  rms log error: before {:.4f}, after {:.4f}\n", fit.rmsBefore,
                     fit.rmsAfter);
  if (fit.runs.size() <= fit.factors.size())
    out += fmt::format("  {} run{} and {} parameter{}: the fit can match every run; no run is "
                       "left to test it (leave-one-out needs more runs than parameters)\n",
                       fit.runs.size(), fit.runs.size() == 1 ? "" : "s", fit.factors.size(),
                       fit.factors.size() == 1 ? "" : "s");
  out += fmt::format("fitted in {:.1f} s\n", fit.seconds);
  return out;
}

json fitToJson(const ProfileFit &fit) {
  json before = json::object(), after = json::object();
  for (const ParameterInfo &info : parameters()) {
    before[info.name] = valueOf(fit.before, info.parameter);
    after[info.name] = valueOf(fit.after, info.parameter);
  }
  json fitted = json::array();
  for (FitParameter f : fit.factors)
    fitted.push_back(fitParameterName(f));
  json runs = json::array();
  for (const ProfileFit::Run &r : fit.runs) {
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

std::string fittedProfileJson(const ProfileFit &fit) {
  std::string source;
  json profile = parseJson(targetProfileText(fit.target, source), source);
  std::string runs;
  for (const ProfileFit::Run &r : fit.runs)
    runs += (runs.empty() ? "" : "; ") + r.name;
  // The provenance under each field's own "sources" key (the efficiency
  // factors share one), naming the parameters fitted there.
  std::map<std::string, std::string> fittedByKey;
  for (FitParameter f : fit.factors) {
    const ParameterInfo &info = infoOf(f);
    json *at = &profile;
    for (const std::string &key : info.path)
      at = &(*at)[key];
    *at = valueOf(fit.after, f);
    std::string key = info.path.front() == "efficiency" ? "efficiency" : info.path.front();
    for (size_t k = 1; k < info.path.size() && info.path.front() != "efficiency"; ++k)
      key += "." + info.path[k];
    std::string &names = fittedByKey[key];
    names += (names.empty() ? "" : ", ") + std::string(info.name);
  }
  for (const auto &[key, names] : fittedByKey) {
    std::string was = profile["sources"].value(key, std::string());
    profile["sources"][key] = fmt::format(
        "{} fitted by kiln plan --fit (least squares on the log error of {} per device, rms "
        "{:.4f} -> {:.4f}) to the published runs: {}.{}{}",
        names, infoOf(fit.factors.front()).memory ? "memory" : "tokens/s", fit.rmsBefore,
        fit.rmsAfter, runs, was.empty() ? "" : " Before: ", was);
  }
  return profile.dump(2) + "\n";
}

} // namespace kiln
