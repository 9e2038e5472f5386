//===- NeuronCompile.cpp - kiln compile: Neuron artifacts of a run --------===//
//
// capture -> autodiff -> optimizer -> shard -> partition (captureTrainingStep)
// -> kiln-lower-to-hlo, kiln-hlo-sink-converts, kiln-hlo-narrow-int64, cse
// -> HloModuleProto -> HLO text, with the manifest that says how to feed
// and read the NEFF: every entry parameter's role, NEFF tensor name,
// per-rank shape and the rule giving each rank's slice of the whole tensor
// (and the rank parameter), the aliasing of updated state, the replica
// groups, the kernels and the per-rank memory plan. The module must pass
// every Neuron conformance rule (NeuronConformance.h) to be written.
//
//===----------------------------------------------------------------------===//

#include "kiln/Driver/NeuronCompile.h"
#include "kiln/Backend/Neuron/HloExport.h"
#include "kiln/Backend/Neuron/HloStats.h"
#include "kiln/Backend/Neuron/NeuronConformance.h"
#include "kiln/Dialect/Hlo/IR/ReplicaGroups.h"
#include "kiln/Dialect/Kiln/IR/KilnDialect.h"
#include "kiln/Dialect/Kiln/IR/KilnOps.h"
#include "kiln/Dialect/Kiln/IR/Sharding.h"
#include "kiln/Driver/CompileArtifacts.h"
#include "kiln/Driver/CompiledStep.h"
#include "kiln/Driver/NeuronManifest.h"
#include "kiln/Driver/NeuronPipelineCompile.h"
#include "kiln/Driver/NkiBinder.h"
#include "kiln/Driver/NkiKernelTable.h"
#include "kiln/Driver/ParallelLayout.h"
#include "kiln/Driver/Planning.h"
#include "kiln/Driver/Training.h"
#include "kiln/Pipeline/KilnPipeline.h"
#include "kiln/Planner/StepPlan.h"
#include "kiln/Planner/TargetProfile.h"
#include "kiln/Support/AtomicDirectory.h"
#include "kiln/Support/Diagnostics.h"
#include "kiln/Support/Error.h"
#include "kiln/Support/FileLock.h"
#include "kiln/Support/Json.h"
#include "kiln/Support/Seconds.h"

#include "llvm/ADT/StringMap.h"

#include "llvm/ADT/StringExtras.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <optional>
#include <set>
#include <sys/stat.h>
#include <unistd.h>

using namespace mlir;
using json = nlohmann::json;

namespace kiln {
namespace {

json describeKernels(func::FuncOp step) {
  json kernels = json::array();
  step.walk([&](KernelOp op) {
    std::optional<NeuronKernel> neuron = op.getSpec().neuron();
    std::string options;
    llvm::raw_string_ostream(options) << op.getOptions();
    kernels.push_back({{"rule", op.getRule().str()},
                       {"fqn", op.getFqn().str()},
                       {"kernel", op.getKernel().str()},
                       {"replaces", op.getTarget().str()},
                       {"custom_call_target", neuron ? neuron->customCallTarget : ""},
                       {"nki_forward", neuron ? neuron->forward : ""},
                       {"nki_backward", neuron ? neuron->backward : ""},
                       {"options", options}});
  });
  return kernels;
}

std::string humanBytes(double bytes) {
  const char *units[] = {"B", "KB", "MB", "GB", "TB"};
  int u = 0;
  while (bytes >= 1000 && u < 4) {
    bytes /= 1000;
    ++u;
  }
  return fmt::format("{:.1f} {}", bytes, units[u]);
}

/// neuronx-cc's arguments before and after the optional ones compile.sh adds.
std::string neuronxHead(TargetName target, int64_t lnc) {
  return fmt::format("neuronx-cc compile model.hlo.pb --framework XLA --target {} -lnc {} "
                     "--model-type transformer",
                     wordOf(target), lnc);
}
// --auto-cast=none: the module's precision is its own (bf16 converts where
// training.mixed_precision_param puts them); neuronx-cc would otherwise cast
// float32 matmuls to bf16 on its own.
constexpr const char *kNeuronxTail = "--auto-cast=none --logfile neuronx-cc.log --output model.neff";
constexpr const char *kLlmTraining = "--distribution-strategy llm-training";

} // namespace

std::string neuronCompileScript(const TrainConfig &config, size_t communicators, bool bindKernels) {
  return fmt::format(R"sh(#!/bin/sh
# Compiles model.hlo.pb (written by kiln compile) into one SPMD NEFF that every
# rank of the {0} grid loads, each fed its own rank id as the 'rank' parameter.
# Needs the AWS Neuron SDK (neuronx-cc). neuronx-cc's log: neuronx-cc.log.
#
# usage: ./compile.sh [-O1] [--no-llm-training] [--verify-hlo]
#   -O1                optimization level 1 (NxD's training scripts use it: a
#                      faster compile) instead of neuronx-cc's default -O2
#   --no-llm-training  without {1}: the retry when the
#                      compile fails in that strategy's passes (NxD's trn2 MoE
#                      scripts turn it off for a compiler bug)
#   --verify-hlo       neuronx-cc's internal HLO verifier, as NxD's trace path
#                      runs it: for a first run on hardware
# The module uses {2} communicators; the runtime it targets allows {3} per NEFF
# (target.neuron_max_communicators: 16 from the Neuron 2.32 runtime, 12 before).
set -eu
cd "$(dirname "$0")"
strategy="{1}"
extra=""
for arg in "$@"; do
  case "$arg" in
    -O1) extra="$extra -O1" ;;
    --no-llm-training) strategy="" ;;
    --verify-hlo) extra="$extra --internal-hlo2tensorizer-options=--verify-hlo=true" ;;
    *) echo "compile.sh: unknown option '$arg' (-O1, --no-llm-training, --verify-hlo)" >&2
       exit 2 ;;
  esac
done
{6}{4} $strategy$extra {5}
)sh",
                     wordOf(*config.target.name), kLlmTraining, communicators,
                     config.target.neuronMaxCommunicators,
                     neuronxHead(*config.target.name, config.target.lnc), kNeuronxTail,
                     bindKernels
                         ? "# The NKI custom calls become the NKI frontend's traces of their "
                           "kernels\n# (kernels.json) before neuronx-cc reads the module.\n"
                           "python3 bind_kernels.py\n"
                         : "");
}

namespace {

std::string readme(const TrainConfig &config, const ParallelLayout &layout) {
  return fmt::format(R"(Kiln's Neuron artifacts of one training step (kiln compile)

model.hlo.pb   xla.HloModuleProto of the per-rank training step (the SPMD program
               every rank runs: forward, loss, backward, gradient clipping,
               AdamW, with all-gather / reduce-scatter / all-reduce over the
               replica groups of the device grid)
model.hlo.txt  the same module in XLA's HLO text syntax
model.hlo.mlir the same module in Kiln's hlo dialect, with each instruction's
               kiln fqn as its location (kiln check-hlo --backend compiled
               compiles it for the CPU)
manifest.json  world size, grid axes and the replica groups of each axis;
               every entry parameter (Hugging Face key, optimizer state name
               or data input), its per-rank shape and which block of the whole
               tensor each rank holds; the outputs that alias (update in
               place) each parameter and state; kernels; the memory plan
kernels.json   every NKI custom call by instruction name: the NKI Library
               function it is bound to, its tensor arguments in signature
               order with the shapes and dtypes the kernel sees (output
               buffers its results alias among them), its keyword arguments
bind_kernels.py  (with NKI calls) the binder compile.sh runs first on the SDK
               host: it traces each call's kernel with the installed NKI
               frontend and writes the payloads into model.hlo.pb (Kiln's
               module kept as model.unbound.hlo.pb)
compile.sh     the neuronx-cc command for {0} (LNC {1})

Run ./compile.sh on a machine with the Neuron SDK: it writes model.neff and
neuronx-cc.log. Launch {2} ranks (one per logical NeuronCore,
NEURON_LOGICAL_NC_CONFIG={1}), each loading model.neff and feeding the entry
parameters by their NEFF names (manifest "neff_name", in manifest order):
each rank's slice of every parameter and optimizer state (manifest "split":
rank r holds block index r along the listed axes, the grid row-major with
the last axis fastest), the step count, its rows of input_ids and labels
(int32), and its global rank id as the int32 scalar 'rank'. The result tuple
holds the updated parameters and state (must-alias: updated in place) and
the loss and gradient norm. Collectives are cross-replica: their replica
groups list global ranks.
)",
                     wordOf(*config.target.name), config.target.lnc, layout.worldSize());
}

} // namespace

TargetProfile neuronRankProfile(const TrainConfig::Target &target) {
  TargetName name = target.nameOr(TargetName::Trn2);
  if (name == TargetName::Trn1)
    return loadTargetProfile("trn1.32xlarge", MachineProbe{});
  if (name != TargetName::Trn2)
    fail("compile: target '{}' is not a Neuron target (trn2, trn1)", wordOf(name));
  TargetProfile profile = loadTargetProfile("trn2.48xlarge", MachineProbe{});
  // The profile's rank is a logical core of two physical ones (LNC=2); at
  // LNC=1 a rank is one core: twice the ranks, each with half the memory,
  // engines and bandwidth of the chip's share.
  if (target.lnc == 1) {
    profile.ranksPerNode *= 2;
    profile.ranksPerDevice *= 2;
    profile.memoryBytes /= 2;
    profile.runtimeReserveBytes /= 2;
    profile.matmulPeakFlops /= 2;
    profile.float8PeakFlops /= 2;
    profile.vectorPeakFlops /= 2;
    profile.memoryBandwidth /= 2;
    profile.name += " at LNC 1";
  }
  return profile;
}

std::string neuronxCommand(TargetName target, int64_t lnc) {
  return fmt::format("{} {} {}", neuronxHead(target, lnc), kLlmTraining, kNeuronxTail);
}

void compileForNeuron(const TrainConfig &given, const std::string &outDir, bool allowOversize) {
  given.refusePlanOnly("compile");
  TrainConfig config = given;
  config.target.name = given.target.nameOr(TargetName::Trn2);
  // A rank of the target (and a target that is not Neuron's refused).
  TargetProfile profile = neuronRankProfile(config.target);
  // The folder is one set (it is what goes to the Neuron host): one compile
  // at a time writes it, and it is replaced as a whole.
  std::optional<FileLock> lock;
  lockOutputFolder(outDir, lock);
  Clock::time_point start = Clock::now();
  Qwen3Config model = config.model.resolve();
  // The shape kiln train gives the run (a token file's where unset), so the
  // module takes the batches the run feeds it.
  ParallelLayout layout = resolveRunLayout(config, model, 1);
  int64_t seq = config.training.seqLen;
  const int64_t world = layout.worldSize();
  if (world > kMaxCompiledWorld)
    fail("compile: parallelism.world_size={} is more than the {} ranks kiln compile builds a "
         "step for: every collective's replica groups list every rank (explicit groups, as "
         "neuronx-cc reads them), so the module grows as the world times its collectives",
         world, kMaxCompiledWorld);
  // Said before each phase that grows with the world.
  auto phase = [&](const char *what) {
    if (world >= kLargeCompiledWorld)
      fmt::print(stderr, "compile: {} for {} ranks (each collective lists them all)...\n", what,
                 world);
  };
  // torchtitan's default on a Neuron target: bf16 parameters and matmuls.
  PrecisionDtype paramDtype = config.training.paramDtypeOr(PrecisionDtype::BFloat16);

  // The run planned on a rank of the target as kiln plan plans it (the same
  // figures, which --search ranked by): a module that cannot run there is
  // not built unless asked for.
  Clock::time_point t = Clock::now();
  if (paramDtype == PrecisionDtype::Float32)
    profile.precision.computeBytes = 4;
  TrainConfig planned = config;
  planned.parallelism.worldSize = world;
  // The planner plans whole nodes or part of one.
  std::optional<StepPlan> stepPlan;
  std::string notPlanned;
  if (world <= profile.ranksPerNode || world % profile.ranksPerNode == 0)
    stepPlan =
        planTrainingRun(planned, profile, std::max<int64_t>(1, world / profile.ranksPerNode));
  else
    notPlanned = fmt::format("{} ranks are neither whole {} nodes of {} ranks nor part of one",
                             world, profile.name, profile.ranksPerNode);
  std::string rankSaid = fmt::format("a {} rank (LNC {}, {})", wordOf(*config.target.name),
                                     config.target.lnc, formatGib(profile.memoryBytes));
  if (!allowOversize && !stepPlan)
    fail("compile: the step's memory cannot be checked against {}: {}; --allow-oversize "
         "writes the module unchecked",
         rankSaid, notPlanned);
  if (!allowOversize && !stepPlan->fits)
    fail("compile: {} at this layout does not fit {}: its plan needs {} per rank; nothing is "
         "written (--allow-oversize writes it anyway; kiln plan --search finds the layouts "
         "that fit)\n{}",
         model.name, rankSaid, formatGib(stepPlan->deviceBytes), formatPlanMemory(*stepPlan));
  double planSeconds = secondsSince(t);

  // Under pipeline parallelism: one module per stage program (as NxD
  // compiles one graph per stage), each rank's update and the schedule.
  if (layout.pp > 1) {
    compilePipelineForNeuron(config, model, layout, outDir);
    return;
  }
  std::unique_ptr<KilnPipelineOptions> options =
      pipelineOptions(config, model, &layout, PrecisionDtype::BFloat16);

  MLIRContext context;
  OwningOpRef<ModuleOp> module = captureTrainingStep(
      context, model, {config.training.localBatchSize * layout.dataParallelDegree(), seq},
      *options);
  double captureSeconds = secondsSince(start) - planSeconds;

  auto step = module->lookupSymbol<func::FuncOp>("train_step");
  auto loss = module->lookupSymbol<func::FuncOp>("loss");
  std::vector<int64_t> grid = layout.shape();
  std::vector<std::string> axisNames = layout.axisNames();
  json manifest;
  manifest["model"] = model.name;
  manifest["target"] = {{"name", wordOf(*config.target.name)}, {"lnc", config.target.lnc}};
  manifest["world_size"] = layout.worldSize();
  manifest["grid"] = json::array();
  for (size_t a = 0; a < grid.size(); ++a)
    manifest["grid"].push_back(
        {{"axis", axisNames[a]},
         {"size", grid[a]},
         {"replica_groups", hlo::gridReplicaGroups(grid, {int16_t(a)})}});
  int64_t microbatches = config.training.microbatches(layout.dataParallelDegree());
  manifest["batch"] = {
      {"global", config.training.globalBatch(layout.dataParallelDegree())},
      {"per_data_parallel_rank", config.training.localBatchSize},
      {"microbatches", microbatches},
      {"seq_len", seq}};
  // Context parallelism's load balancing: the runtime lays each input's
  // sequence out head-tail before slicing it over cp.
  if (int64_t chunks = layout.sequenceLayout().headTailChunks)
    manifest["batch"]["head_tail_chunks"] = chunks;
  manifest["parameters"] = describeParameters(step, loss, grid, axisNames);
  manifest["kernels"] = describeKernels(step);
  // Plain HLO runs a MoE layer's experts densely (LowerToHloMoe.cpp); the
  // manifest and the summary name those layers.
  std::vector<std::string> denseExperts;
  // Behind the all-to-all dispatcher (blocked), every row of the rank's
  // buffer is computed by each of its experts: that many FLOPs per routed pair.
  llvm::StringMap<int64_t> routedPairs; // per layer: its dispatch's slots
  step.walk([&](ExpertDispatchOp d) {
    routedPairs[d.getFqn()] = cast<RankedTensorType>(d.getSlots().getType()).getNumElements();
  });
  double blockedRatio = 0;
  step.walk([&](GroupedExpertsOp op) {
    denseExperts.push_back(op.getFqn().str());
    auto pairs = routedPairs.find(op.getFqn());
    if (op.getBlocked() && blockedRatio == 0 && pairs != routedPairs.end())
      blockedRatio = double(cast<RankedTensorType>(op.getW1().getType()).getDimSize(0)) *
                     double(cast<RankedTensorType>(op.getExperts().getType()).getNumElements()) /
                     double(pairs->second);
  });
  manifest["dense_expert_layers"] = denseExperts;
  if (stepPlan) {
    const MemoryPlan &plan = stepPlan->memory;
    manifest["memory_plan_per_rank"] = {{"peak_bytes", plan.peakBytes},
                                        {"parameter_bytes", plan.parameterBytes},
                                        {"optimizer_state_bytes", plan.stateBytes},
                                        {"gradient_bytes", plan.gradientBytes},
                                        {"saved_activation_bytes", plan.savedActivationBytes},
                                        {"device_bytes", stepPlan->deviceBytes},
                                        {"rank_memory_bytes", profile.memoryBytes},
                                        {"profile", profile.name},
                                        {"fits", stepPlan->fits}};
  } else {
    manifest["memory_plan_per_rank"] = {{"not_planned", notPlanned}};
  }
  manifest["outputs"] = describeOutputs(step);

  t = Clock::now();
  phase("lowering the step to HLO");
  runKilnPipeline(*module, *options, LoweringStage::Hlo, LoweringStage::PerRank,
                  "lowering @train_step of " + model.name + " to HLO failed");
  double lowerSeconds = secondsSince(t);

  t = Clock::now();
  phase("exporting the HLO module and checking its conformance");
  FailureOr<xla::HloModuleProto> proto;
  succeedOrFail(context, "exporting the HLO module failed", [&] {
    proto = neuron::exportHloModule(*module, "train_step");
    return failure(failed(proto));
  });
  std::string bytes = proto->SerializeAsString();
  std::string text = neuron::printHloText(*proto);
  std::string mlirText = printHloStep(*module);
  neuron::HloStats stats = neuron::HloStats::of(*proto);
  describeEntry(*proto, manifest["parameters"], manifest["outputs"]);
  std::vector<neuron::ConformanceViolation> violations = neuron::checkConformance(
      *proto, layout.worldSize(), config.target.neuronMaxCommunicators);
  if (!violations.empty())
    fail("compile: the HLO module of {} breaks {}:\n{}", model.name,
         violations.size() == 1 ? "a Neuron conformance rule" : "Neuron conformance rules",
         neuron::describeViolations(violations));
  json kernelTable = nkiKernelTable(*proto, *config.target.name, config.target.lnc);
  double exportSeconds = secondsSince(t);

  json aliases = json::array();
  for (const auto &e : proto->input_output_alias().entries())
    aliases.push_back({{"output", e.output_shape_index(0)},
                       {"parameter", e.parameter_number()},
                       {"kind", e.kind() == xla::MUST_ALIAS ? "must-alias" : "may-alias"}});
  manifest["input_output_alias"] = aliases;
  json collectives = json::object();
  for (const auto &[key, c] : stats.collectives)
    collectives[key] = {{"ops", c.ops},
                        {"bytes_sent_per_rank", c.bytesSent},
                        {"groups", c.groups},
                        {"group_size", c.groupSize}};
  manifest["hlo"] = {{"instructions", stats.instructions},
                     {"by_opcode", stats.byOpcode},
                     {"collectives", collectives},
                     {"distinct_replica_group_lists", stats.replicaGroupLists.size()}};
  manifest["target"]["neuron_max_communicators"] = config.target.neuronMaxCommunicators;
  manifest["collective_model"] =
      "cross-replica: every collective lists explicit replica groups of global ranks (replica "
      "id = rank), with no channel_id and no use_global_device_ids; all-to-all in its array form";
  manifest["rank"] = "the last entry parameter, 'rank' (int32 scalar): each rank is fed its "
                     "global id; every per-rank offset is derived from it in the graph";
  manifest["compile_command"] = neuronxCommand(*config.target.name, config.target.lnc);
  manifest["token_ids"] = "int32 parameters (input_ids, labels; ids < vocab), as is the step "
                          "counter: the module has no 64-bit integers";
  // kiln-lower-to-hlo puts an opt-barrier before each checkpointed layer's
  // recomputation ("<layer>.recompute") and each FSDP re-gather
  // ("regather"), so that XLA neither merges them into the forward nor
  // hoists them.
  int64_t recomputeBarriers = 0, regatherBarriers = 0;
  for (const auto &comp : proto->computations())
    for (const auto &inst : comp.instructions())
      if (inst.opcode() == "opt-barrier") {
        StringRef name = inst.metadata().op_name();
        recomputeBarriers += name.ends_with("recompute");
        regatherBarriers += name == "regather";
      }
  manifest["activation_checkpoint"] = {
      {"mode", wordOf(config.activationCheckpoint.mode)},
      {"selective_ac_option", config.activationCheckpoint.selectiveAcOption},
      {"opt_barriers", recomputeBarriers}};
  manifest["regather_opt_barriers"] = regatherBarriers;
  manifest["mixed_precision"] = {{"param", wordOf(paramDtype)},
                                 {"reduce", wordOf(config.training.mixedPrecisionReduce)}};

  t = Clock::now();
  phase("writing the artifacts");
  try {
    writeDirectoryAtomic(outDir, [&](const std::string &dir) {
      writeFileAtomic(dir + "/model.hlo.pb", bytes);
      writeFileAtomic(dir + "/model.hlo.txt", text);
      writeFileAtomic(dir + "/model.hlo.mlir", mlirText);
      writeFileAtomic(dir + "/manifest.json", manifest.dump(2) + "\n");
      writeFileAtomic(dir + "/kernels.json", kernelTable.dump(2) + "\n");
      bool bindKernels = !kernelTable["calls"].empty();
      if (bindKernels)
        writeFileAtomic(dir + "/bind_kernels.py", nkiBinderScript());
      writeFileAtomic(dir + "/compile.sh",
                      neuronCompileScript(config, stats.replicaGroupLists.size(), bindKernels));
      ::chmod((dir + "/compile.sh").c_str(), 0755);
      writeFileAtomic(dir + "/README.txt", readme(config, layout));
      if (config.debug.killDuringCompile)
        ::kill(::getpid(), SIGKILL);
    });
  } catch (const std::filesystem::filesystem_error &e) {
    fail("compile: cannot write the artifacts to '{}': {}", outDir, e.what());
  }
  double writeSeconds = secondsSince(t);

  fmt::print(
      "compiled {} for {} (LNC {}): {} rank{} (dp_replicate {} x dp_shard {}{} x tp {}{}), "
      "batch {} x seq {}{}\n",
      model.name, wordOf(*config.target.name), config.target.lnc, layout.worldSize(),
      layout.worldSize() > 1 ? "s" : "", layout.dpReplicate, layout.dpShard, layout.cpSummary(),
      layout.tp, layout.expertsSummary().empty() ? "" : ", " + layout.expertsSummary(),
      manifest["batch"]["global"].get<int64_t>(), seq,
      microbatches > 1 ? fmt::format(" in {} microbatches of {}", microbatches,
                                     config.training.localBatchSize * layout.dataParallelDegree())
                       : "");
  fmt::print("precision: {} parameters and matmuls; float32 master weights, optimizer state "
             "and gradient reductions (training.mixed_precision_param)\n",
             wordOf(paramDtype));
  fmt::print("HLO: {} instructions, {} custom calls\n", stats.instructions, stats.customCalls);
  if (!kernelTable["calls"].empty()) {
    std::set<std::string> unbound;
    size_t bound = 0;
    for (const json &call : kernelTable["calls"]) {
      if (call["binding"].is_null())
        unbound.insert(call["kiln_kernel"].get<std::string>() + " " +
                       call["direction"].get<std::string>());
      else
        ++bound;
    }
    fmt::print("NKI kernels (kernels.json): {} of {} calls bound to NKI Library functions, {} "
               "distinct traces for the binder{}\n",
               bound, kernelTable["calls"].size(), kernelTable["distinct_traces"].get<size_t>(),
               unbound.empty() ? ""
                               : "; not bound yet: " + llvm::join(unbound, ", ") +
                                     " (neuronx-cc cannot compile these calls)");
  }
  if (config.activationCheckpoint.mode != CheckpointMode::None)
    fmt::print("activation checkpointing: {}{}, {} opt-barriers keep the recomputation in the "
               "backward\n",
               wordOf(config.activationCheckpoint.mode),
               config.activationCheckpoint.mode == CheckpointMode::Selective
                   ? " (" + config.activationCheckpoint.selectiveAcOption + ")"
                   : "",
               recomputeBarriers);
  if (regatherBarriers > 0)
    fmt::print("FSDP: {} parameter re-gathers for the backward, each behind an opt-barrier (the "
               "forward's gather is not kept live)\n",
               regatherBarriers);
  if (!denseExperts.empty())
    fmt::print("MoE: {} expert layer{} ({}{}) in plain HLO, dense: all {} experts{} over every "
               "{}, {}x the routed FLOPs; a kiln.grouped_experts rule with kernel "
               "nki_grouped_experts runs them grouped\n",
               denseExperts.size(), denseExperts.size() > 1 ? "s" : "", denseExperts.front(),
               denseExperts.size() > 1 ? ", ..." : "", model.numExperts / layout.ep,
               layout.ep > 1 ? fmt::format(" of each rank's block (ep {})", layout.ep) : "",
               blockedRatio > 0   ? "row of its all-to-all buffer"
               : layout.ep > 1 ? "token of its expert group"
                               : "token",
               blockedRatio > 0 ? blockedRatio
                                : double(model.numExperts) / double(model.numExpertsPerTok));
  for (const auto &[key, c] : stats.collectives) {
    // The first group, its middle elided when long: {0,1,2,...,63},...
    std::string first = key.substr(key.find(' ') + 2);
    first = first.substr(0, first.find('}') + 1);
    if (first.size() > 24)
      first = first.substr(0, first.find(',', first.find(',', first.find(',') + 1) + 1) + 1) +
              "..." + first.substr(first.rfind(','));
    std::string groups = "{" + first + (c.groups > 1 ? ",...}" : "}");
    fmt::print("  {:<15} {:>5} ops  {:>10} sent per rank  {} group{} of {}: {}\n",
               key.substr(0, key.find(' ')), c.ops, humanBytes(double(c.bytesSent)), c.groups,
               c.groups > 1 ? "s" : "", c.groupSize, groups);
  }
  fmt::print("distinct replica-group lists: {} (the runtime allows {} per NEFF: "
             "target.neuron_max_communicators)\n",
             stats.replicaGroupLists.size(), config.target.neuronMaxCommunicators);
  fmt::print("Neuron conformance: all {} rules hold (kiln check-hlo --neuron {} checks them "
             "again)\n",
             neuron::conformanceRules().size(), outDir);
  if (stepPlan) {
    const MemoryPlan &plan = stepPlan->memory;
    fmt::print("memory per rank (kiln plan on {}): {} of {} -> {} (live peak {}: parameters "
               "{}, optimizer state {}; saved activations {})\n",
               profile.name, formatGib(stepPlan->deviceBytes), rankSaid,
               stepPlan->fits ? "fits" : "DOES NOT FIT, written as --allow-oversize asked",
               formatGib(plan.peakBytes), formatGib(plan.parameterBytes),
               formatGib(plan.stateBytes), formatGib(plan.savedActivationBytes));
  } else {
    fmt::print("memory per rank: not planned ({}), written unchecked as --allow-oversize asked\n",
               notPlanned);
  }
  fmt::print("time: capture+passes {:.2f} s, plan {:.2f} s, lower {:.2f} s, export {:.2f} s, "
             "write {:.2f} s\n",
             captureSeconds, planSeconds, lowerSeconds, exportSeconds, writeSeconds);
  fmt::print("wrote {}/{{model.hlo.pb, model.hlo.txt, model.hlo.mlir, manifest.json, "
             "kernels.json, compile.sh, README.txt}}\n",
             outDir);
  fmt::print("on a machine with the Neuron SDK: {}/compile.sh  ({})\n", outDir,
             neuronxCommand(*config.target.name, config.target.lnc));
}

} // namespace kiln
