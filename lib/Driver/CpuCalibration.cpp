//===- CpuCalibration.cpp - Fit the cpu profile's efficiencies ------------===//

#include "kiln/Driver/CpuCalibration.h"
#include "kiln/Driver/Planning.h"
#include "kiln/Driver/Training.h"
#include "kiln/Planner/Precision.h"
#include "kiln/Planner/StepPlan.h"
#include "kiln/Planner/StepSchedule.h"
#include "kiln/Runtime/CpuPeak.h"
#include "kiln/Support/Error.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <random>

namespace kiln {

namespace {

using OpTimes = std::map<mlir::Operation *, double>;

/// Planned and measured seconds of the ops `select` picks, at `target`.
std::pair<double, double> plannedAndMeasured(mlir::func::FuncOp step,
                                             const TargetProfile &target,
                                             const ValuePrecision &precision,
                                             const OpTimes &measured,
                                             const std::function<bool(const ScheduledOp &)> &select,
                                             EfficiencyFit *totals = nullptr) {
  double planned = 0, seconds = 0;
  for (const ScheduledOp &op : scheduleStep(step, target, precision).ops) {
    auto it = measured.find(op.op);
    if (it == measured.end() || !select(op))
      continue;
    planned += op.seconds;
    seconds += it->second;
    if (totals) {
      ++totals->count;
      totals->flops += op.flops;
      totals->bytes += op.bytes;
    }
  }
  return {planned, seconds};
}

/// The value of `factor` in [1e-4, 1] at which the selected ops' planned
/// time equals their measured time (planned time falls as the factor rises;
/// bisection in log space). 1 when even the full peak plans them slower.
double fitFactor(mlir::func::FuncOp step, TargetProfile &target,
                 const ValuePrecision &precision, const OpTimes &measured, double &factor,
                 const std::function<bool(const ScheduledOp &)> &select) {
  auto plannedOver = [&](double value) {
    factor = value;
    auto [planned, seconds] = plannedAndMeasured(step, target, precision, measured, select);
    return planned - seconds;
  };
  double lo = std::log(1e-4), hi = 0;
  if (plannedOver(1.0) >= 0)
    return factor = 1.0;
  for (int i = 0; i < 40; ++i) {
    double mid = (lo + hi) / 2;
    (plannedOver(std::exp(mid)) > 0 ? lo : hi) = mid;
  }
  return factor = std::exp(hi);
}

} // namespace

CpuCalibration calibrateCpu(const TrainConfig &config, int64_t steps) {
  if (steps < 2)
    fail("calibrate-cpu: --steps must be at least 2 (the first step only warms up), got {}",
         steps);
  Trainer trainer(config);
  trainer.timeOps(true);
  const MpiWorld &world = MpiWorld::get();
  CpuCalibration out;
  out.steps = steps;

  // Random tokens: the kernels' time does not depend on the ids.
  int64_t batch = trainer.globalBatchSize(), seq = trainer.config().training.seqLen;
  Tensor tokens(DType::I64, {batch, seq + 1});
  std::mt19937_64 random(uint64_t(config.training.seed));
  std::uniform_int_distribution<int64_t> id(0, trainer.model().vocabSize - 1);
  for (int64_t i = 0; i < batch * (seq + 1); ++i)
    tokens.mutableData<int64_t>()[i] = id(random);

  OpTimes fastest;
  out.measuredStepSeconds = std::numeric_limits<double>::infinity();
  for (int64_t s = 1; s <= steps; ++s) {
    StepMetrics m = trainer.step(tokens);
    if (s == 1)
      continue;
    out.measuredStepSeconds = std::min(out.measuredStepSeconds, m.seconds);
    for (const auto &[op, seconds] : m.opSeconds) {
      auto [it, added] = fastest.emplace(op, seconds);
      if (!added)
        it->second = std::min(it->second, seconds);
    }
  }

  auto step = trainer.module().lookupSymbol<mlir::func::FuncOp>("train_step");
  out.shipped = cpuTargetForRanks(world.localSize());
  ValuePrecision precision(step, out.shipped.precision);
  PlanSetting setting = planSetting(trainer.config(), trainer.model(), trainer.layout(),
                                    std::max(1, world.size() / world.localSize()));
  out.shippedStepSeconds = planStep(step, out.shipped, setting).stepSeconds;

  // The per-op overhead first: the median time of the ops whose work at the
  // full measured rates would take under a tenth of their time (scalars,
  // small elementwise ops), whose time is dispatch and thread wake-up.
  TargetProfile ideal = out.shipped;
  ideal.efficiency = {1, 1, 1, 1, 1, 0};
  std::vector<double> small;
  for (const ScheduledOp &op : scheduleStep(step, ideal, precision).ops)
    if (!op.collective && fastest.count(op.op) && op.seconds < 0.1 * fastest.at(op.op))
      small.push_back(fastest.at(op.op));
  if (small.empty())
    small.push_back(0);
  std::sort(small.begin(), small.end());
  TargetProfile &t = out.fitted = out.shipped;
  t.efficiency.opOverheadSeconds = small[small.size() / 2];
  out.fits.push_back({"efficiency.op_overhead_seconds",
                      fmt::format("median of the {} ops taking 10x their ideal time", small.size()),
                      int64_t(small.size())});
  out.fits.back().shipped = out.shipped.efficiency.opOverheadSeconds;
  out.fits.back().fitted = t.efficiency.opOverheadSeconds;

  // Ops timed as their GEMMs do not depend on a class factor: they get a row
  // of their own, planned against measured, and stay out of the fits.
  auto ofClass = [](OpClass c) {
    return [c](const ScheduledOp &op) {
      return !op.collective && op.opClass == c && !op.gemmsTimed;
    };
  };
  EfficiencyFit gemms{"gemm_seconds", "GEMMs timed at their shapes (linear, its backward, "
                                      "the fused loss)"};
  gemms.measuredRates = true;
  std::tie(gemms.shippedSeconds, gemms.measuredSeconds) = plannedAndMeasured(
      step, out.shipped, precision, fastest,
      [](const ScheduledOp &op) { return !op.collective && op.gemmsTimed; }, &gemms);
  if (gemms.count > 0)
    out.fits.push_back(gemms);
  auto communication = [](const ScheduledOp &op) { return bool(op.collective); };
  struct Step {
    const char *field, *ops;
    double TargetProfile::Efficiency::*factor;
    std::function<bool(const ScheduledOp &)> select;
  };
  // Vector ops stream memory: they fit the memory bandwidth's factor, with
  // their compute rate taken as the full sgemm rate (efficiency.vector = 1)
  // so that the fitted bandwidth alone explains their time; GEMMs and
  // attention then fit their own factors at that bandwidth.
  t.efficiency.vector = 1.0;
  const Step order[] = {
      {"efficiency.memory", "vector ops (elementwise, norms, softmax, AdamW)",
       &TargetProfile::Efficiency::memory, ofClass(OpClass::Vector)},
      {"efficiency.matmul", "GEMMs (linear and its backward, grouped experts)",
       &TargetProfile::Efficiency::matmul, ofClass(OpClass::Matmul)},
      {"efficiency.attention", "attention and its backward", &TargetProfile::Efficiency::attention,
       ofClass(OpClass::Attention)},
      {"efficiency.collective", "collectives (shard dialect)", &TargetProfile::Efficiency::collective,
       communication},
  };
  for (const Step &s : order) {
    EfficiencyFit fit{s.field, s.ops};
    fit.shipped = out.shipped.efficiency.*(s.factor);
    std::tie(fit.shippedSeconds, fit.measuredSeconds) =
        plannedAndMeasured(step, out.shipped, precision, fastest, s.select, &fit);
    if (fit.count == 0)
      continue; // e.g. no collectives on one rank
    fit.fitted = fitFactor(step, t, precision, fastest, t.efficiency.*(s.factor), s.select);
    out.fits.push_back(fit);
  }
  out.fits.push_back({"efficiency.vector", "held at 1 (vector ops fit efficiency.memory)"});
  out.fits.back().shipped = out.shipped.efficiency.vector;
  out.fits.back().fitted = 1.0;
  out.fittedStepSeconds = planStep(step, t, setting).stepSeconds;
  return out;
}

std::string formatCpuCalibration(const CpuCalibration &c) {
  std::string out = fmt::format(
      "calibrate-cpu: {} steps; per-op times are each op's fastest after the first step\n"
      "  sgemm peak {:.1f} GFLOP/s, memory bandwidth {:.1f} GB/s ({})\n",
      c.steps, c.shipped.matmulPeakFlops / 1e9, c.shipped.memoryBandwidth / 1e9,
      cpuRatesSource());
  out += fmt::format("  {:<31} {:>6} {:>12} {:>12} {:>10} {:>10} {:>9} {:>9}  {}\n", "field",
                     "ops", "GFLOP", "MB", "measured", "shipped", "was", "fitted", "from");
  for (const EfficiencyFit &f : c.fits) {
    std::string was = f.measuredRates ? "measured" : fmt::format("{:.3g}", f.shipped);
    std::string fitted = f.measuredRates ? "" : fmt::format("{:.3g}", f.fitted);
    out += fmt::format("  {:<31} {:>6} {:>12.3f} {:>12.1f} {:>9.4f}s {:>9.4f}s {:>9} {:>9}  {}\n",
                       f.field, f.count, f.flops / 1e9, f.bytes / 1e6, f.measuredSeconds,
                       f.shippedSeconds, was, fitted, f.ops);
  }
  out += fmt::format("  step: measured {:.4f} s (fastest), planned {:.4f} s with the shipped "
                     "profile, {:.4f} s with the fitted factors\n",
                     c.measuredStepSeconds, c.shippedStepSeconds, c.fittedStepSeconds);
  const TargetProfile::Efficiency &e = c.fitted.efficiency;
  nlohmann::json fitted = {{"matmul", e.matmul},         {"attention", e.attention},
                           {"vector", e.vector},         {"memory", e.memory},
                           {"collective", e.collective}, {"op_overhead_seconds", e.opOverheadSeconds}};
  out += "  fitted \"efficiency\": " + fitted.dump() + "\n";
  return out;
}

} // namespace kiln
