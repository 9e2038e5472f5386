//===- NeuronPipelineCompile.cpp - kiln compile under pipeline parallelism -===//
//
// As NxD compiles one graph per pipeline stage, kiln compile under
// `pipeline_parallel_degree > 1` writes one HLO module per stage program:
// each stage's forward and backward of one microbatch (the stage functions
// kiln train runs, partitioned when a stage has several ranks) and each
// pipeline rank's update, each in its own folder with its manifest and
// compile.sh. The top manifest gives the schedule each pipeline rank runs
// (which module each action loads) and what crosses each stage boundary.
//
//===----------------------------------------------------------------------===//

#include "kiln/Driver/NeuronPipelineCompile.h"
#include "kiln/Backend/Neuron/HloExport.h"
#include "kiln/Backend/Neuron/HloStats.h"
#include "kiln/Backend/Neuron/NeuronConformance.h"
#include "kiln/Config/PipelineSchedule.h"
#include "kiln/Dialect/Hlo/IR/ReplicaGroups.h"
#include "kiln/Dialect/Kiln/IR/KilnDialect.h"
#include "kiln/Driver/CompileArtifacts.h"
#include "kiln/Driver/NeuronCompile.h"
#include "kiln/Driver/NeuronManifest.h"
#include "kiln/Driver/PipelineConfig.h"
#include "kiln/Driver/PipelineStageFunctions.h"
#include "kiln/Driver/Planning.h"
#include "kiln/Pipeline/KilnPipeline.h"
#include "kiln/Support/AtomicDirectory.h"
#include "kiln/Support/Diagnostics.h"
#include "kiln/Support/Error.h"
#include "kiln/Support/Json.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <filesystem>

#include <sys/stat.h>

using json = nlohmann::json;

namespace kiln {

namespace {

/// One module's artifacts.
struct StageModule {
  std::string name; ///< its folder: stage<s>_forward, stage<s>_backward, update_pp<r>
  std::string proto, text;
  json manifest;
  size_t communicators = 0;
  int64_t instructions = 0;
};

/// Lowers function `fn` of `module` (a copy: the lowering keeps only it) to
/// HLO, checks Neuron's conformance rules on it and describes its entry.
StageModule lowerModule(mlir::ModuleOp module, const std::string &fn, const std::string &name,
                        const KilnPipelineOptions &options, const ParallelLayout &layout,
                        const TrainConfig &config) {
  StageModule out;
  out.name = name;
  auto func = module.lookupSymbol<mlir::func::FuncOp>(fn);
  auto loss = module.lookupSymbol<mlir::func::FuncOp>("loss");
  if (!func || !loss)
    fail("compile: the stage programs have no @{} or @loss", fn);
  json params = describeParameters(func, loss, layout.shape(), layout.axisNames());
  json outputs = describeOutputs(func);
  mlir::PassManager pm(module.getContext());
  buildHloLowering(pm, options, fn);
  succeedOrFail(*module.getContext(), "lowering @" + fn + " to HLO failed",
                [&] { return pm.run(module); });
  mlir::FailureOr<xla::HloModuleProto> proto;
  succeedOrFail(*module.getContext(), "exporting @" + fn + " as an HLO module failed", [&] {
    proto = neuron::exportHloModule(module, fn);
    return mlir::failure(mlir::failed(proto));
  });
  std::vector<neuron::ConformanceViolation> violations =
      neuron::checkConformance(*proto, layout.worldSize(), config.target.neuronMaxCommunicators);
  if (!violations.empty())
    fail("compile: the HLO module of @{} breaks {}:\n{}", fn,
         violations.size() == 1 ? "a Neuron conformance rule" : "Neuron conformance rules",
         neuron::describeViolations(violations));
  describeEntry(*proto, params, outputs);
  neuron::HloStats stats = neuron::HloStats::of(*proto);
  out.proto = proto->SerializeAsString();
  out.text = neuron::printHloText(*proto);
  out.communicators = stats.replicaGroupLists.size();
  out.instructions = stats.instructions;
  out.manifest = {{"module", name},
                  {"function", fn},
                  {"world_size", layout.worldSize()},
                  {"target",
                   {{"name", wordOf(*config.target.name)},
                    {"lnc", config.target.lnc},
                    {"neuron_max_communicators", config.target.neuronMaxCommunicators}}},
                  {"parameters", params},
                  {"outputs", outputs},
                  {"hlo_instructions", stats.instructions},
                  {"distinct_replica_group_lists", stats.replicaGroupLists.size()}};
  return out;
}

} // namespace

void compilePipelineForNeuron(const TrainConfig &config, const Qwen3Config &model,
                              const ParallelLayout &layout, const std::string &outDir) {
  // A stage with several ranks (FSDP, TP, EP inside it) is partitioned for
  // the layout without its pipeline axis, as kiln train partitions it.
  ParallelLayout inner = layout;
  inner.pp = 1;
  std::unique_ptr<KilnPipelineOptions> options = pipelineOptions(
      config, model, inner.worldSize() > 1 ? &inner : nullptr, PrecisionDtype::BFloat16);
  bool partitioned = options->worldSize() > 1;
  PipelineSchedule schedule = layout.pipelineSchedule(config.training.localBatchSize);
  int64_t runs = config.training.microbatches(layout.dataParallelDegree());
  mlir::MLIRContext context;
  mlir::OwningOpRef<mlir::ModuleOp> stages =
      captureStageFunctions(context, model, layout, config.training.seqLen, *options);

  std::vector<StageModule> modules;
  for (int64_t s = 0; s < schedule.numStages(); ++s)
    for (const char *part : {"forward", "backward"}) {
      mlir::OwningOpRef<mlir::ModuleOp> copy = stages->clone();
      std::string fn = stageFunction(*copy, s, part).getName().str();
      modules.push_back(
          lowerModule(*copy, fn, fmt::format("stage{}_{}", s, part), *options, layout, config));
    }
  // Replicas of whole stages sum their gradients in the update.
  std::vector<int64_t> replicaAxes;
  if (!partitioned && layout.dpReplicate > 1)
    replicaAxes.push_back(1); // [pp, dp_replicate, ...]
  for (int64_t r = 0; r < layout.pp; ++r) {
    mlir::OwningOpRef<mlir::ModuleOp> copy = stages->clone();
    addPipelineUpdate(*copy, *options,
                      schedule.microbatches * runs * (partitioned ? 1 : layout.dpReplicate),
                      layout.pp, r, layout.shape(), layout.axisNames(), replicaAxes);
    modules.push_back(
        lowerModule(*copy, "train_step", fmt::format("update_pp{}", r), *options, layout, config));
  }

  // What crosses each boundary, as the forward of its stage returns it
  // (the cotangent going back has the same type), and between which ranks.
  std::vector<int64_t> grid = layout.shape();
  int64_t inner_ranks = layout.worldSize() / layout.pp;
  json boundaries = json::array();
  for (int64_t b = 0; b + 1 < schedule.numStages(); ++b) {
    const json &outputs = modules[size_t(2 * b)].manifest["outputs"];
    json tensors = json::array();
    for (const json &o : outputs)
      if (o.contains("transfer"))
        tensors.push_back({{"transfer", o["transfer"]}, {"output", o["index"]}});
    json pairs = json::array();
    for (int64_t i = 0; i < inner_ranks; ++i)
      pairs.push_back(
          {schedule.rankOf(b) * inner_ranks + i, schedule.rankOf(b + 1) * inner_ranks + i});
    boundaries.push_back(
        {{"from_stage", b}, {"to_stage", b + 1}, {"activations", tensors}, {"rank_pairs", pairs}});
  }
  json ranks = json::array();
  for (int64_t r = 0; r < layout.pp; ++r) {
    json actions = json::array();
    for (const PipelineAction &a : schedule.ranks[size_t(r)]) {
      json action{{"action", a.str()}};
      if (a.kind == PipelineActionKind::Forward || a.kind == PipelineActionKind::Backward)
        action["module"] = fmt::format(
            "stage{}_{}", a.stage, a.kind == PipelineActionKind::Forward ? "forward" : "backward");
      actions.push_back(action);
    }
    json global = json::array();
    for (int64_t i = 0; i < inner_ranks; ++i)
      global.push_back(r * inner_ranks + i);
    ranks.push_back({{"pp_rank", r},
                     {"global_ranks", global},
                     {"stages", layout.stages.stagesOf(r)},
                     {"actions", actions},
                     {"update", fmt::format("update_pp{}", r)}});
  }
  json manifest;
  manifest["model"] = model.name;
  manifest["target"] = {{"name", wordOf(*config.target.name)},
                        {"lnc", config.target.lnc},
                        {"neuron_max_communicators", config.target.neuronMaxCommunicators}};
  manifest["world_size"] = layout.worldSize();
  manifest["batch"] = {{"global", config.training.globalBatch(layout.dataParallelDegree())},
                       {"per_data_parallel_rank", config.training.localBatchSize},
                       {"seq_len", config.training.seqLen}};
  manifest["mixed_precision"] = {{"param", wordOf(PrecisionDtype(options->paramDtype))},
                                 {"reduce", wordOf(config.training.mixedPrecisionReduce)}};
  manifest["grid"] = json::array();
  for (size_t a = 0; a < grid.size(); ++a)
    manifest["grid"].push_back({{"axis", layout.axisNames()[a]},
                                {"size", grid[a]},
                                {"replica_groups", hlo::gridReplicaGroups(grid, {int16_t(a)})}});
  manifest["pipeline"] = {
      {"degree", layout.pp},
      {"schedule", wordOf(schedule.kind)},
      {"stages", schedule.numStages()},
      {"microbatches", schedule.microbatches},
      {"microbatch_rows_per_data_parallel_rank", layout.microbatchSize},
      {"schedule_runs_per_step", runs},
      {"stage_partitioned", partitioned},
      {"boundaries", boundaries},
      {"ranks", ranks},
      {"transfers",
       "not HLO modules yet: the runtime moves each boundary's activations (and their "
       "cotangents back) between the rank pairs listed, as NxD's pipeline does with an "
       "all-gather over each two-rank group"}};
  json names = json::array();
  for (const StageModule &m : modules)
    names.push_back(m.name);
  manifest["modules"] = names;
  manifest["compile_command"] = neuronxCommand(*config.target.name, config.target.lnc);

  std::string compileAll = "#!/bin/sh\n# Compiles every module of the pipeline (each folder's "
                           "compile.sh, with the options given).\nset -eu\ncd \"$(dirname "
                           "\"$0\")\"\nfor m in";
  for (const StageModule &m : modules)
    compileAll += " " + m.name;
  compileAll += "; do (cd \"$m\" && ./compile.sh \"$@\"); done\n";
  try {
    writeDirectoryAtomic(outDir, [&](const std::string &dir) {
      for (const StageModule &m : modules) {
        std::string sub = dir + "/" + m.name;
        std::filesystem::create_directories(sub);
        writeFileAtomic(sub + "/model.hlo.pb", m.proto);
        writeFileAtomic(sub + "/model.hlo.txt", m.text);
        writeFileAtomic(sub + "/manifest.json", m.manifest.dump(2) + "\n");
        writeFileAtomic(sub + "/compile.sh", neuronCompileScript(config, m.communicators));
        ::chmod((sub + "/compile.sh").c_str(), 0755);
      }
      writeFileAtomic(dir + "/manifest.json", manifest.dump(2) + "\n");
      writeFileAtomic(dir + "/compile.sh", compileAll);
      ::chmod((dir + "/compile.sh").c_str(), 0755);
    });
  } catch (const std::filesystem::filesystem_error &e) {
    fail("compile: cannot write the artifacts to '{}': {}", outDir, e.what());
  }

  fmt::print("compiled {} for {} (LNC {}) under pipeline parallelism: {} ranks (pp {} x "
             "dp_replicate {} x dp_shard {} x tp {}{}), {} stages under {}, {} microbatches of {} "
             "rows per data-parallel rank\n",
             model.name, wordOf(*config.target.name), config.target.lnc, layout.worldSize(),
             layout.pp, layout.dpReplicate, layout.dpShard, layout.tp,
             layout.expertsSummary().empty() ? "" : ", " + layout.expertsSummary(),
             schedule.numStages(), wordOf(schedule.kind), schedule.microbatches,
             layout.microbatchSize);
  for (const StageModule &m : modules)
    fmt::print("  {:<18} {:>7} HLO instructions, {} replica-group lists\n", m.name, m.instructions,
               m.communicators);
  fmt::print("Neuron conformance: all {} rules hold in every module\n",
             neuron::conformanceRules().size());
  fmt::print("wrote {} modules (model.hlo.pb, model.hlo.txt, manifest.json, compile.sh each), "
             "the schedule (manifest.json) and compile.sh to {}\n",
             modules.size(), outDir);
}

} // namespace kiln
