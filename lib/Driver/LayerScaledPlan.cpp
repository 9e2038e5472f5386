//===- LayerScaledPlan.cpp - A plan scaled from a few layers ---------------===//

#include "kiln/Driver/LayerScaledPlan.h"
#include "kiln/Config/SelectiveAcOption.h"
#include "kiln/Dialect/Kiln/IR/KilnOps.h"
#include "kiln/Driver/Planning.h"
#include "kiln/Planner/MemoryPlan.h"
#include "kiln/Planner/ModulePath.h"
#include "kiln/Planner/Precision.h"
#include "kiln/Support/Error.h"

#include <fmt/format.h>

#include <cctype>
#include <cmath>
#include <functional>
#include <map>
#include <numeric>
#include <unordered_map>

namespace kiln {
namespace {

/// `config` with `layers` decoder layers.
TrainConfig withLayers(const TrainConfig &config, int64_t layers) {
  TrainConfig reduced = config;
  reduced.model.overrides["num_hidden_layers"] = layers;
  return reduced;
}

/// `text` with the index of each "layers.<i>" replaced by `name(i)`.
std::string mapLayerIndices(const std::string &text,
                            const std::function<std::string(int64_t)> &name) {
  static const std::string kPrefix = "layers.";
  std::string out;
  size_t at = 0;
  while (true) {
    size_t found = text.find(kPrefix, at);
    if (found == std::string::npos)
      break;
    size_t digits = found + kPrefix.size(), end = digits;
    while (end < text.size() && std::isdigit(static_cast<unsigned char>(text[end])))
      ++end;
    out += text.substr(at, digits - at);
    if (end > digits)
      out += name(std::stoll(text.substr(digits, end - digits)));
    at = end;
  }
  return out + text.substr(at);
}

/// `text` of a reduced model of `reducedLayers` layers with its layers
/// renamed for the whole model's `layers`: the first period keeps its
/// indices, the later layers are the whole model's last.
std::string renameLayers(const std::string &text, int64_t period, int64_t reducedLayers,
                         int64_t layers) {
  return mapLayerIndices(text, [&](int64_t i) {
    return std::to_string(i < period ? i : i + layers - reducedLayers);
  });
}

/// `text` of a model of `layers` layers with each layer named from the
/// start in the first period ("first0") and from the end otherwise
/// ("last1": the last layer), as every reduced model names the same point.
std::string layerKey(const std::string &text, int64_t period, int64_t layers) {
  return mapLayerIndices(text, [&](int64_t i) {
    return i < period ? "first" + std::to_string(i) : "last" + std::to_string(layers - i);
  });
}

/// A reduced model planned, with every acquisition of its memory plan and
/// each one's key: the buffer as the plan names it, its layer named from
/// the start (first period) or from the end, and its occurrence, so that
/// the same point of two reduced models has the same key.
struct ReducedRun {
  int64_t layers = 0;
  CapturedRun run;
  StepPlan plan;
  std::vector<MemoryEvent> timeline;
  std::vector<std::string> keys;
  std::unordered_map<std::string, size_t> index; ///< key -> its place in timeline
};

/// The layer a buffer comes from when its own op names none (FSDP's padding
/// of a layer's gradient, a collective, an optimizer update): the first
/// layer found walking up its operands, a parameter or state argument by
/// its name; "" for none (the embeddings, the loss).
std::string layerOrigin(mlir::func::FuncOp fn, mlir::Value start) {
  std::vector<mlir::Value> queue = {start};
  llvm::DenseSet<mlir::Value> seen = {start};
  for (size_t i = 0; i < queue.size() && i < 64; ++i) {
    mlir::Value value = queue[i];
    std::string key = moduleKeyOf(value);
    if (auto arg = llvm::dyn_cast<mlir::BlockArgument>(value))
      for (llvm::StringRef role : {kParamAttr, kStateAttr})
        if (auto name = fn.getArgAttrOfType<mlir::StringAttr>(arg.getArgNumber(), role))
          key = moduleKey(name.getValue());
    if (llvm::StringRef(key).starts_with("layers."))
      return key;
    if (mlir::Operation *op = value.getDefiningOp())
      for (mlir::Value operand : op->getOperands())
        if (seen.insert(operand).second)
          queue.push_back(operand);
  }
  return "";
}

ReducedRun planReduced(const TrainConfig &config, int64_t layers, int64_t period,
                       const TargetProfile &target, int64_t nodes, mlir::TimingScope *timing) {
  ReducedRun r;
  r.layers = layers;
  r.run = captureForPlanning(withLayers(config, layers), target, nodes, timing);
  r.plan = planStep(r.run.step, target, r.run.setting, timing, &r.timeline);
  std::map<std::string, int64_t> seen;
  for (const MemoryEvent &event : r.timeline) {
    // The module names the layer of a collective, which has no fqn.
    std::string key = layerKey(describeBuffer(r.run.step, event.creator) + " in " +
                                   moduleKeyOf(event.creator) + " from " +
                                   layerOrigin(r.run.step, event.creator),
                               period, layers);
    if (auto result = llvm::dyn_cast<mlir::OpResult>(event.creator))
      key += "#" + std::to_string(result.getResultNumber());
    key += "@" + std::to_string(seen[key]++);
    r.index.emplace(key, r.keys.size());
    r.keys.push_back(std::move(key));
  }
  return r;
}

/// The most two successive pairs of reduced models may disagree on the
/// whole model's step time, relative to it, for the later pair to be
/// scaled: a quarter of the 0.1% the scaled plan promises.
constexpr double kSteadyTolerance = 2.5e-4;

/// The live peak of a model of `layers` layers scaled from `a` and `b`
/// (one period apart): the largest of the points both have, each scaled (a
/// point in a middle layer of `b` lies between the same point in the first
/// and last layers, which are scaled instead); with the point's index in
/// each timeline. None when they share no point.
struct ScaledPeak {
  int64_t bytes = 0;
  size_t inA = 0, inB = 0;
};
std::optional<ScaledPeak> scaledPeak(const ReducedRun &a, const ReducedRun &b, int64_t layers,
                                     int64_t p) {
  const int64_t periods = (layers - b.layers) / p;
  std::optional<ScaledPeak> peak;
  for (size_t j = 0; j < b.keys.size(); ++j) {
    auto i = a.index.find(b.keys[j]);
    if (i == a.index.end())
      continue;
    int64_t x = a.timeline[i->second].live, y = b.timeline[j].live;
    int64_t live = y + (y - x) * periods;
    if (!peak || live > peak->bytes)
      peak = ScaledPeak{live, i->second, j};
  }
  return peak;
}

/// Each point `a`, `b` and `c` (one period apart) share grows by the same
/// bytes from `a` to `b` as from `b` to `c`.
bool pointsScale(const ReducedRun &a, const ReducedRun &b, const ReducedRun &c) {
  for (size_t k = 0; k < c.keys.size(); ++k) {
    auto i = a.index.find(c.keys[k]), j = b.index.find(c.keys[k]);
    if (i == a.index.end() || j == b.index.end())
      continue;
    int64_t x = a.timeline[i->second].live, y = b.timeline[j->second].live;
    if (c.timeline[k].live != y + (y - x))
      return false;
  }
  return true;
}

StepPlan scale(const ReducedRun &a, const ReducedRun &b, const ScaledPeak &peakAt,
               const PlannedRun &whole, int64_t p, const TargetProfile &target) {
  const int64_t layers = whole.model.numLayers, large = b.layers;
  const int64_t periods = (layers - large) / p;
  auto bytes = [&](int64_t x, int64_t y) { return y + (y - x) * periods; };
  auto seconds = [&](double x, double y) { return y + (y - x) * double(periods); };
  auto rename = [&](const std::string &text) { return renameLayers(text, p, large, layers); };

  StepPlan plan = b.plan;
  plan.setting = whole.setting;
  MemoryPlan &m = plan.memory;
  {
    ValuePrecision precision(b.run.step, target.precision);
    MemoryPlanOptions at;
    at.reportAfter = int64_t(peakAt.inB) + 1;
    MemoryPlan there = planMemory(b.run.step, &precision, at);
    m.topContributors = there.topContributors;
    for (MemoryPlan::Contributor &c : m.topContributors)
      c.what = rename(c.what);
    plan.peakAt = rename(describePeakOp(there.peakOp));
  }
  m.peakBytes = peakAt.bytes;
  for (size_t c = 0; c < kNumMemoryCategories; ++c)
    m.peakByCategory[c] =
        bytes(a.timeline[peakAt.inA].byCategory[c], b.timeline[peakAt.inB].byCategory[c]);
  m.argumentBytes = bytes(a.plan.memory.argumentBytes, m.argumentBytes);
  m.parameterBytes = bytes(a.plan.memory.parameterBytes, m.parameterBytes);
  m.stateBytes = bytes(a.plan.memory.stateBytes, m.stateBytes);
  m.gradientBytes = bytes(a.plan.memory.gradientBytes, m.gradientBytes);
  m.savedActivationBytes = bytes(a.plan.memory.savedActivationBytes, m.savedActivationBytes);
  // Not scaled: the intermediate peak (kiln train reports it, not the plan)
  // and the split by module, which needs every layer's buffers.
  m.peakIntermediateBytes = 0;
  m.peakByModule.clear();

  StepSchedule &s = plan.schedule;
  const StepSchedule &x = a.plan.schedule;
  s.ops.clear(); // the reduced model's ops: no trace
  s.seconds = seconds(x.seconds, s.seconds);
  s.computeSeconds = seconds(x.computeSeconds, s.computeSeconds);
  s.communicationSeconds = seconds(x.communicationSeconds, s.communicationSeconds);
  s.flops = seconds(x.flops, s.flops);
  s.recomputeSeconds = seconds(x.recomputeSeconds, s.recomputeSeconds);
  s.recomputeFlops = seconds(x.recomputeFlops, s.recomputeFlops);
  for (auto &[key, totals] : plan.collectives) {
    auto before = a.plan.collectives.find(key);
    CollectiveTotals y = before == a.plan.collectives.end() ? CollectiveTotals() : before->second;
    totals.count = bytes(y.count, totals.count);
    totals.bytesSent = bytes(y.bytesSent, totals.bytesSent);
    totals.twoLevel = bytes(y.twoLevel, totals.twoLevel);
    totals.seconds = seconds(y.seconds, totals.seconds);
  }
  completePlan(plan);
  return plan;
}

} // namespace

std::optional<int64_t> layerPeriod(const TrainConfig &config) {
  Qwen3Config model = config.model.resolve();
  if (!model.mlpOnlyLayers.empty())
    return std::nullopt;
  int64_t period = model.isMoe() ? std::max<int64_t>(1, model.decoderSparseStep) : 1;
  if (config.activationCheckpoint.mode == CheckpointMode::Selective)
    if (std::optional<SelectiveAcOption> option =
            parseSelectiveAcOption(config.activationCheckpoint.selectiveAcOption);
        option && !option->opLevel)
      period = std::lcm(period, option->every);
  return period;
}

std::optional<StepPlan> planScaledFromLayers(const TrainConfig &config, const TargetProfile &given,
                                             int64_t nodes, mlir::TimingScope *timing) {
  TargetProfile target = targetForRun(config, given);
  PlannedRun whole = resolvePlannedRun(config, target, nodes);
  std::optional<int64_t> period = layerPeriod(whole.config);
  if (!period)
    return std::nullopt;
  const int64_t p = *period, layers = whole.model.numLayers;
  // The smaller model holds a whole first and a whole last period, so that
  // every point of the step where the whole model's peak can fall (in its
  // first or last layers, or outside them) is in both reduced models.
  int64_t small = layers % p;
  while (small < std::max<int64_t>(2, 2 * p))
    small += p;
  // Memory is exact from any two such models; the step's critical path
  // (two streams, each waiting on the other) grows by the same time per
  // period only past a transient of a few layers (while one stream's lead
  // over the other builds up). So models one period larger are planned
  // until two successive periods add the same time, and those are scaled;
  // if the reduced models together grow past the whole one, it is planned
  // whole instead.
  int64_t captured = 0;
  auto reduced = [&](int64_t n) -> std::optional<ReducedRun> {
    captured += n;
    if (captured >= layers)
      return std::nullopt;
    return planReduced(config, n, p, target, nodes, timing);
  };
  std::optional<ReducedRun> a = reduced(small), b = reduced(small + p), c;
  if (!a || !b)
    return std::nullopt;
  for (int64_t large = small + 2 * p;; large += p) {
    // Reset first: a run's module must go before its context, which a
    // member-wise move assignment would replace first.
    if (c) {
      a.reset();
      a = std::move(b);
      b.reset();
      b = std::move(c);
      c.reset();
    }
    c = reduced(large);
    if (!c)
      return std::nullopt;
    double before = b->plan.stepSeconds - a->plan.stepSeconds;
    double after = c->plan.stepSeconds - b->plan.stepSeconds;
    // The whole model's step as the last two would scale it, and how far
    // the previous two would put it from there.
    double periods = double(layers - large) / double(p);
    double scaled = c->plan.stepSeconds + after * periods;
    if (std::fabs(after - before) * periods <= kSteadyTolerance * scaled)
      break;
  }
  // Every point the three share must grow by the same bytes from one to the
  // next, and the first two must give the third's peak: else the keys do not
  // follow the program's points, and the whole model is planned instead.
  std::optional<ScaledPeak> check = scaledPeak(*a, *b, c->layers, p);
  if (!check || check->bytes != c->plan.memory.peakBytes || !pointsScale(*a, *b, *c))
    return std::nullopt;
  std::optional<ScaledPeak> peak = scaledPeak(*b, *c, layers, p);
  if (!peak)
    return std::nullopt;
  return scale(*b, *c, *peak, whole, p, target);
}

} // namespace kiln
