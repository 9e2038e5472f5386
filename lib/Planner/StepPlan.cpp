//===- StepPlan.cpp - A training step planned on a target -----------------===//

#include "kiln/Planner/StepPlan.h"
#include "kiln/Planner/Precision.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

using namespace mlir;

namespace kiln {

int64_t devicePeakBytes(int64_t peakBytes, const TargetProfile &target) {
  return int64_t(double(peakBytes) * (1 + target.allocatorOverhead)) +
         target.runtimeReserveBytes;
}

std::string describePeakOp(Operation *op) {
  if (!op)
    return "the arguments";
  std::string what = op->getName().getStringRef().str();
  if (auto fqn = op->getAttrOfType<StringAttr>("fqn"))
    what += " " + fqn.getValue().str();
  return what;
}

StepPlan planStep(func::FuncOp perRankStep, const TargetProfile &target,
                  const PlanSetting &setting, TimingScope *timing,
                  std::vector<MemoryEvent> *memoryTimeline) {
  auto phase = [&](StringRef name) { return timing ? timing->nest(name) : TimingScope(); };
  StepPlan plan;
  plan.setting = setting;
  plan.target = target;
  plan.worldSize =
      setting.worldSize > 0 ? setting.worldSize : target.ranksPerNode * setting.nodes;

  TimingScope precisionTime = phase("value precision");
  ValuePrecision precision(perRankStep, target.precision);
  precisionTime.stop();
  TimingScope memoryTime = phase("memory plan");
  MemoryPlanOptions memoryOptions;
  memoryOptions.timeline = memoryTimeline;
  plan.memory = planMemory(perRankStep, &precision, memoryOptions);
  memoryTime.stop();
  plan.peakAt = describePeakOp(plan.memory.peakOp);
  plan.memory.peakOp = nullptr;

  TimingScope scheduleTime = phase("schedule (op costs, collectives, critical path)");
  plan.schedule = scheduleStep(perRankStep, target, precision);
  scheduleTime.stop();
  for (const ScheduledOp &op : plan.schedule.ops)
    if (op.collective) {
      CollectiveTotals &totals =
          plan.collectives[{collectiveKindName(op.collective->kind), op.collective->axes}];
      ++totals.count;
      totals.bytesSent += op.collective->bytesSent;
      totals.seconds += op.seconds;
      totals.twoLevel += op.algorithm == CollectiveAlgorithm::TwoLevel;
    }
  completePlan(plan);
  return plan;
}

void completePlan(StepPlan &plan) {
  const TargetProfile &target = plan.target;
  const PlanSetting &setting = plan.setting;
  plan.totalBytes = plan.memory.peakBytes + target.runtimeReserveBytes;
  plan.deviceBytes = devicePeakBytes(plan.memory.peakBytes, target);
  plan.fits = plan.deviceBytes <= target.memoryBytes;
  plan.stepSeconds = plan.schedule.seconds;
  plan.exposedCommunicationSeconds =
      std::max(0.0, plan.schedule.seconds - plan.schedule.computeSeconds);
  if (plan.stepSeconds > 0) {
    double tokensPerSecond = double(setting.tokensPerStep) / plan.stepSeconds;
    plan.tokensPerSecondPerDevice = tokensPerSecond / double(plan.worldSize);
    plan.tflopsPerDevice = setting.flopsPerToken * plan.tokensPerSecondPerDevice / 1e12;
    plan.mfu = plan.tflopsPerDevice * 1e12 / target.matmulPeakFlops;
    plan.mfuNxdt =
        setting.nxdtFlopsPerToken * plan.tokensPerSecondPerDevice / target.matmulPeakFlops;
    plan.usdPerMillionTokens =
        target.pricePerHourUsd * double(setting.nodes) / 3600.0 / tokensPerSecond * 1e6;
  }
}

nlohmann::json flopsJson(double flops) {
  if (std::fabs(flops) < 0x1p63)
    return int64_t(std::llround(flops));
  return flops;
}

nlohmann::json planToJson(const StepPlan &plan) {
  using nlohmann::json;
  json memory = json::object();
  for (size_t c = 0; c < kNumMemoryCategories; ++c)
    memory[memoryCategoryName(MemoryCategory(c))] = plan.memory.peakByCategory[c];
  memory["runtime_reserve"] = plan.target.runtimeReserveBytes;
  memory["total"] = plan.totalBytes;
  json collectives = json::array();
  for (const auto &[key, totals] : plan.collectives)
    collectives.push_back({{"kind", key.first},
                           {"axes", key.second},
                           {"count", totals.count},
                           {"bytes_sent_per_rank", totals.bytesSent},
                           {"seconds", totals.seconds},
                           {"two_level", totals.twoLevel}});
  json contributors = json::array();
  for (const MemoryPlan::Contributor &c : plan.memory.topContributors)
    contributors.push_back(
        {{"what", c.what}, {"category", memoryCategoryName(c.category)}, {"bytes", c.bytes}});
  json byModule = json::object();
  for (const auto &[module, bytes] : plan.memory.peakByModule)
    byModule[module] = bytes;
  const PlanSetting &s = plan.setting;
  json out{
      {"model", s.model},
      {"target", plan.target.name},
      {"nodes", s.nodes},
      {"world_size", plan.worldSize},
      {"layout", s.layout},
      {"parameters", s.parameters},
      {"tokens_per_step", s.tokensPerStep},
      {"flops_per_token", s.flopsPerToken},
      {"fits", plan.fits},
      {"memory_per_rank_bytes", memory},
      {"memory_device_peak_bytes", plan.deviceBytes},
      {"memory_capacity_bytes", plan.target.memoryBytes},
      {"memory_peak_at", plan.peakAt},
      {"saved_activation_bytes", plan.memory.savedActivationBytes},
      {"memory_top_contributors", contributors},
      {"memory_by_module", byModule},
      {"step_seconds", plan.stepSeconds},
      {"compute_seconds", plan.schedule.computeSeconds},
      {"communication_seconds", plan.schedule.communicationSeconds},
      {"exposed_communication_seconds", plan.exposedCommunicationSeconds},
      {"flops_per_rank", flopsJson(plan.schedule.flops)},
      {"recompute_flops_per_rank", flopsJson(plan.schedule.recomputeFlops)},
      {"recompute_seconds", plan.schedule.recomputeSeconds},
      {"float8_gemms", plan.schedule.float8Gemms},
      {"float8_seconds", plan.schedule.float8Seconds},
      {"tokens_per_second_per_device", plan.tokensPerSecondPerDevice},
      {"tflops_per_device", plan.tflopsPerDevice},
      {"mfu", plan.mfu},
      {"mfu_nxdt", plan.mfuNxdt},
      {"price_per_hour_usd", plan.target.pricePerHourUsd},
      {"usd_per_million_tokens", plan.usdPerMillionTokens},
      {"collectives", collectives},
  };
  if (const std::optional<PipelineFigures> &p = plan.pipeline)
    out["pipeline"] = {{"schedule", p->schedule},
                       {"degree", p->degree},
                       {"stages_per_rank", p->stagesPerRank},
                       {"microbatches", p->microbatches},
                       {"schedule_runs", p->scheduleRuns},
                       {"forward_seconds", p->forwardSeconds},
                       {"backward_seconds", p->backwardSeconds},
                       {"transfer_bytes", p->transferBytes},
                       {"transfer_seconds", p->transferSeconds},
                       {"makespan_seconds", p->makespanSeconds},
                       {"bubble_fraction", p->bubbleFraction},
                       {"update_seconds", p->updateSeconds},
                       {"compute_seconds", p->computeSeconds},
                       {"flops", p->flops},
                       {"peak_bytes", p->peakBytes},
                       {"largest_rank", p->largestRank}};
  return out;
}

namespace {

std::string bar(int64_t bytes, int64_t capacity, int width = 40) {
  int filled = capacity > 0 ? int(std::min<double>(width, double(bytes) / capacity * width + 0.5))
                            : 0;
  if (bytes > 0 && filled == 0)
    filled = 1;
  return std::string(filled, '#') + std::string(width - filled, '.');
}

std::string seconds(double s) {
  return s >= 1 ? fmt::format("{:.3f} s", s) : fmt::format("{:.2f} ms", s * 1e3);
}

/// A transfer's size: bytes below a MiB, MiB above.
std::string formatBytes(int64_t bytes) {
  return bytes < (int64_t(1) << 20) ? fmt::format("{} bytes", bytes)
                                    : fmt::format("{:.2f} MiB", double(bytes) / double(1 << 20));
}
} // namespace

std::string formatGib(int64_t bytes) {
  return fmt::format("{:.2f} GiB", double(bytes) / double(int64_t(1) << 30));
}

std::string formatPlanMemory(const StepPlan &plan) {
  const TargetProfile &t = plan.target;
  std::string out;
  if (plan.deviceBytes == plan.totalBytes)
    out += fmt::format("memory per rank: {} of {} -> {}\n", formatGib(plan.totalBytes),
                       formatGib(t.memoryBytes), plan.fits ? "fits" : "DOES NOT FIT");
  else
    out += fmt::format("memory per rank: {} as the device's allocator holds it ({} live, + {:.0f}% "
                       "of its peak: allocator_overhead) of {} -> {}\n",
                       formatGib(plan.deviceBytes), formatGib(plan.totalBytes), 100 * t.allocatorOverhead,
                       formatGib(t.memoryBytes), plan.fits ? "fits" : "DOES NOT FIT");
  auto row = [&](const char *name, int64_t bytes) {
    out += fmt::format("  {:<19} {:>10}  {}\n", name, formatGib(bytes), bar(bytes, t.memoryBytes));
  };
  for (size_t c = 0; c < kNumMemoryCategories; ++c)
    row(memoryCategoryName(MemoryCategory(c)), plan.memory.peakByCategory[c]);
  row("runtime_reserve", t.runtimeReserveBytes);
  out += fmt::format("  (peak after {}; by module:", plan.peakAt);
  for (size_t i = 0; i < plan.memory.peakByModule.size() && i < 4; ++i)
    out += fmt::format("{} {} {}", i ? "," : "", plan.memory.peakByModule[i].first,
                       formatGib(plan.memory.peakByModule[i].second));
  out += plan.memory.peakByModule.size() > 4 ? ", ...)\n" : ")\n";
  // All of them, live at the peak or not: what activation checkpointing shrinks.
  out += fmt::format("  activations saved for the backward: {}\n",
                     formatGib(plan.memory.savedActivationBytes));
  if (!plan.fits) {
    out += fmt::format("  over by {}{}\n", formatGib(plan.deviceBytes - t.memoryBytes),
                       plan.memory.topContributors.empty() ? "" : "; largest buffers at the peak:");
    for (const MemoryPlan::Contributor &c : plan.memory.topContributors)
      out += fmt::format("    {:>10}  {:<18} {}\n", formatGib(c.bytes), memoryCategoryName(c.category),
                         c.what);
  }
  return out;
}

std::string formatPlan(const StepPlan &plan) {
  const PlanSetting &s = plan.setting;
  const TargetProfile &t = plan.target;
  std::string out = fmt::format("plan: {} on {} x{} ({} ranks: {})\n", s.model, t.name, s.nodes,
                                plan.worldSize, s.layout);
  out += formatPlanMemory(plan);
  // A step that does not fit never runs: its time is what the layout would
  // take with the memory, and it has no throughput, MFU or price to compare.
  out += fmt::format("step: {}{} (compute {}, communication {}, exposed {})\n",
                     plan.fits ? "" : "would take ", seconds(plan.stepSeconds),
                     seconds(plan.schedule.computeSeconds),
                     seconds(plan.schedule.communicationSeconds),
                     seconds(plan.exposedCommunicationSeconds));
  if (const std::optional<PipelineFigures> &p = plan.pipeline) {
    out += fmt::format("  pipeline: {} run{} of {} x {} microbatches over {} stages; a run takes "
                       "{}, {:.1f}% of it bubble; transfers of {} take {} each\n",
                       p->scheduleRuns, p->scheduleRuns == 1 ? "" : "s", p->schedule,
                       p->microbatches, p->degree * p->stagesPerRank, seconds(p->makespanSeconds),
                       100 * p->bubbleFraction, formatBytes(p->transferBytes),
                       seconds(p->transferSeconds));
    for (size_t s = 0; s < p->forwardSeconds.size(); ++s)
      out += fmt::format("    stage {} on pp rank {}: forward {}, backward {} per microbatch\n", s,
                         s % size_t(p->degree), seconds(p->forwardSeconds[s]),
                         seconds(p->backwardSeconds[s]));
    for (size_t r = 0; r < p->updateSeconds.size(); ++r)
      out += fmt::format("    pp rank {}: compute {}, update {}, memory {}{}\n", r,
                         seconds(p->computeSeconds[r]), seconds(p->updateSeconds[r]),
                         formatGib(devicePeakBytes(p->peakBytes[r], t)),
                         int64_t(r) == p->largestRank ? " (the largest: memory above)" : "");
  }
  if (plan.schedule.recomputeFlops > 0)
    out += fmt::format("  of the compute, activation checkpointing recomputes {} ({:.4g} FLOPs "
                       "per rank)\n",
                       seconds(plan.schedule.recomputeSeconds),
                       plan.schedule.recomputeFlops);
  if (plan.schedule.float8Gemms > 0)
    out += fmt::format("  Float8 linears: {} GEMMs in float8, {:.0f}% of the FLOPs, {} with their "
                       "operands' casts\n",
                       plan.schedule.float8Gemms,
                       100 * plan.schedule.float8Flops / std::max(1.0, plan.schedule.flops),
                       seconds(plan.schedule.float8Seconds));
  if (plan.fits) {
    out += fmt::format("throughput: {:.1f} tokens/s per device, {:.1f} TFLOPS per device, "
                       "MFU {:.1f}% ({:.4g} FLOPs/token, {} tokens per step)\n",
                       plan.tokensPerSecondPerDevice, plan.tflopsPerDevice, 100 * plan.mfu,
                       s.flopsPerToken, s.tokensPerStep);
    // A published MFU compares only under its own FLOP count.
    if (plan.mfuNxdt > 0)
      out += fmt::format("  MFU by NxDT's count {:.1f}% ({:.4g} FLOPs/token: 3 x the forward "
                         "with the embeddings as matmuls, no causal halving); above, "
                         "torchtitan's (6 N + 12 L H Q T)\n",
                         100 * plan.mfuNxdt, s.nxdtFlopsPerToken);
    // What AWS users compare: a chip (several ranks on Trainium) and an instance.
    double perDevice = plan.tokensPerSecondPerDevice;
    std::string perChip;
    if (t.ranksPerDevice > 1)
      perChip = fmt::format(" per chip {:.1f} ({} ranks),", perDevice * t.ranksPerDevice,
                            t.ranksPerDevice);
    int64_t perInstance = std::min(t.ranksPerNode, plan.worldSize);
    out += fmt::format("  tokens/s{} per instance {:.1f} ({} ranks), for the job {:.1f}\n",
                       perChip, perDevice * perInstance, perInstance, perDevice * plan.worldSize);
    out += fmt::format("cost: ${:.2f}/hour x {} -> ${:.3f} per million tokens{}\n",
                       t.pricePerHourUsd, s.nodes, plan.usdPerMillionTokens,
                       plan.worldSize < t.ranksPerNode * s.nodes
                           ? fmt::format(" (the whole instance billed: {} of its {} ranks used)",
                                         plan.worldSize, t.ranksPerNode)
                           : "");
  } else {
    out += fmt::format("throughput, MFU and cost: none, the step does not fit ({:.4g} "
                       "FLOPs/token, {} tokens per step; kiln plan --search finds layouts "
                       "that fit)\n",
                       s.flopsPerToken, s.tokensPerStep);
  }
  if (!plan.collectives.empty()) {
    out += "collectives per rank and step:\n";
    for (const auto &[key, totals] : plan.collectives)
      out += fmt::format("  {:<15} on {:<24} {:>6} ops {:>12} sent {:>12}{}\n", key.first,
                         key.second, totals.count, formatGib(totals.bytesSent),
                         seconds(totals.seconds),
                         totals.twoLevel ? fmt::format("  ({} two-level)", totals.twoLevel)
                                         : std::string());
  }
  return out;
}

} // namespace kiln
