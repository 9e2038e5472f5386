//===- Planning.cpp - Plan a training run on a target ---------------------===//

#include "kiln/Driver/Planning.h"
#include "kiln/Driver/ParallelLayout.h"
#include "kiln/Driver/PipelinePlanning.h"
#include "kiln/Driver/Training.h"
#include "kiln/Runtime/CpuPeak.h"
#include "kiln/Runtime/SgemmTiming.h"
#include "kiln/Runtime/ThreadBudget.h"
#include "kiln/Support/Error.h"

#include "mlir/IR/MLIRContext.h"

#include <fmt/format.h>

#include <algorithm>
#include <thread>

namespace kiln {

MachineProbe thisMachine() {
  MachineProbe probe;
  probe.sgemmFlops = measureCpuPeakFlops;
  probe.memoryBandwidth = measureCpuMemoryBandwidth;
  probe.memoryBytes = physicalMemoryBytes;
  probe.gemmSeconds = [](const GemmShape &g, int64_t ranksOnMachine) {
    // A rank gets its share of the cores: what this process runs with (one
    // thread per rank under mpiexec), at most the machine's cores / ranks
    // (kiln plan timing for one of several ranks).
    int share = int(std::max<int64_t>(1, int64_t(std::thread::hardware_concurrency()) /
                                             std::max<int64_t>(1, ranksOnMachine)));
    return sgemmSeconds({g.m, g.n, g.k, g.transA, g.transB, g.accumulate},
                        std::min(ThreadBudget::current(), share));
  };
  return probe;
}

TargetProfile targetForRun(const TrainConfig &config, const TargetProfile &target) {
  TargetProfile run = target;
  if (!config.float8Linears())
    return run;
  if (run.float8PeakFlops <= 0)
    fail("plan: model.converters=[\"float8\"] on {}, whose profile ({}) states no Float8 rate "
         "(peak_flops_per_rank.matmul_float8)",
         target.name, target.source);
  PrecisionPolicy::Float8Linears &f8 = run.precision.float8;
  f8.enabled = true;
  f8.weightGradientHighPrecision = config.float8.recipeName == Float8Recipe::RowwiseWithGwHp;
  f8.filterFqns = config.float8.filterFqns;
  return run;
}

StepPlan planTrainingRun(const TrainConfig &config, const TargetProfile &given, int64_t nodes,
                         mlir::TimingScope *timing) {
  TargetProfile target = targetForRun(config, given);
  PlannedRun planned = resolvePlannedRun(config, target, nodes);
  if (planned.layout.pp > 1)
    return planPipelinedRun(planned, target, timing);
  CapturedRun run = captureForPlanning(config, target, nodes, timing);
  return planStep(run.step, target, run.setting, timing);
}

PlannedRun resolvePlannedRun(const TrainConfig &config, const TargetProfile &target,
                             int64_t nodes) {
  if (nodes < 1)
    fail("plan: --nodes must be at least 1, got {}", nodes);
  int64_t world = target.ranksPerNode * nodes;
  TrainConfig train = config;
  int64_t asked = train.parallelism.worldSize;
  // A run on part of one node (4 GPUs of 8) uses that many of its ranks; a
  // run over several nodes fills them.
  if (asked > 0 && nodes == 1 && asked < world)
    world = asked;
  else if (asked > 0 && asked != world)
    fail("plan: parallelism.world_size={} but {} node{} of {} hold{} {} ranks (a run on part "
         "of a node: --nodes 1 and fewer ranks)",
         asked, nodes, nodes == 1 ? "" : "s", target.name, nodes == 1 ? "s" : "", world);
  train.parallelism.worldSize = world;
  Qwen3Config model = train.model.resolve();
  ParallelLayout layout = ParallelLayout::resolve(train.parallelism, model,
                                                  train.training.seqLen, 1);
  PlanSetting setting = planSetting(train, model, layout, nodes);
  setting.worldSize = world;
  return {train, model, layout, setting};
}

CapturedRun captureForPlanning(const TrainConfig &config, const TargetProfile &target,
                               int64_t nodes, mlir::TimingScope *timing) {
  auto [train, model, layout, setting] = resolvePlannedRun(config, target, nodes);
  // One program per rank class: a pipeline has several (planPipelinedRun).
  if (layout.pp > 1)
    fail("plan: parallelism.pipeline_parallel_degree={}: pipelined runs are planned by kiln "
         "plan alone, not yet by --fit, --validate or --search",
         layout.pp);
  int64_t seq = train.training.seqLen;
  CaptureOptions shape;
  shape.seq = seq;
  shape.batch = train.training.localBatchSize * layout.dataParallelDegree();
  std::unique_ptr<KilnPipelineOptions> options = pipelineOptions(train, model, &layout);
  // The planner sizes values at the target's precision itself (Precision.h):
  // it plans the float32 program.
  options->paramDtype = PrecisionDtype::Float32;
  options->timing = timing;
  CapturedRun run;
  run.context = std::make_unique<mlir::MLIRContext>();
  run.module = captureTrainingStep(*run.context, model, shape, *options);
  run.step = run.module->lookupSymbol<mlir::func::FuncOp>("train_step");
  if (!run.step)
    fail("plan: the captured module has no @train_step");
  run.setting = setting;
  return run;
}

PlanSetting planSetting(const TrainConfig &config, const Qwen3Config &model,
                        const ParallelLayout &layout, int64_t nodes) {
  int64_t seq = config.training.seqLen;
  PlanSetting setting;
  setting.model = model.name;
  setting.parameters = model.parameterCount();
  setting.flopsPerToken = torchtitanFlopsPerToken(model, seq);
  setting.nxdtFlopsPerToken = nxdtFlopsPerToken(model, seq);
  setting.torchtitanBefore1923FlopsPerToken = torchtitanBefore1923FlopsPerToken(model, seq);
  int64_t microbatches = config.training.microbatches(layout.dataParallelDegree());
  setting.tokensPerStep = config.training.globalBatch(layout.dataParallelDegree()) * seq;
  setting.nodes = nodes;
  setting.layout = fmt::format(
      "{}dp_replicate {} x dp_shard {}{} x tp {}{}{}{}",
      layout.pp > 1 ? fmt::format("pp {} x ", layout.pp) : "", layout.dpReplicate, layout.dpShard,
      layout.cpSummary(), layout.tp,
      layout.expertsSummary().empty() ? "" : " (" + layout.expertsSummary() + ")",
      layout.sequenceParallel ? " (sequence parallel)" : "",
      microbatches > 1 ? fmt::format(", {} microbatches accumulated", microbatches) : "");
  return setting;
}

TargetProfile cpuTargetForRanks(int64_t ranksOnMachine) {
  TargetProfile target = loadTargetProfile("cpu", thisMachine());
  if (ranksOnMachine > 1) {
    // The profile's rates are the whole machine's (measured with every core);
    // its ranks split the cores, the memory and the memory bandwidth.
    target.ranksPerNode = ranksOnMachine;
    target.memoryBytes /= ranksOnMachine;
    target.matmulPeakFlops /= double(ranksOnMachine);
    target.vectorPeakFlops /= double(ranksOnMachine);
    target.memoryBandwidth /= double(ranksOnMachine);
  }
  return target;
}

} // namespace kiln
