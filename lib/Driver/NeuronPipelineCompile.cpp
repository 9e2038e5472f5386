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
#include "kiln/Dialect/Hlo/IR/HloOps.h"
#include "kiln/Dialect/Hlo/IR/ReplicaGroups.h"
#include "kiln/Dialect/Kiln/IR/KilnDialect.h"
#include "kiln/Driver/CompileArtifacts.h"
#include "kiln/Driver/NeuronCompile.h"
#include "kiln/Driver/NeuronManifest.h"
#include "kiln/Driver/NkiBinder.h"
#include "kiln/Driver/NkiKernelTable.h"
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
#include <map>

#include <sys/stat.h>

using json = nlohmann::json;

namespace kiln {

namespace {

/// One module's artifacts.
struct StageModule {
  std::string name; ///< its folder: stage<s>_forward, stage<s>_backward, update_pp<r>
  std::string proto, text;
  json manifest, kernels;
  size_t communicators = 0;
  int64_t instructions = 0;
};

/// `proto` (the HLO module of function `fn`) as the folder `name`: checked
/// against Neuron's conformance rules, its manifest's `params` and
/// `outputs` completed with what the module says, and its figures.
StageModule packModule(const std::string &name, const std::string &fn,
                       const xla::HloModuleProto &proto, json params, json outputs,
                       const ParallelLayout &layout, const TrainConfig &config) {
  std::vector<neuron::ConformanceViolation> violations =
      neuron::checkConformance(proto, layout.worldSize(), config.target.neuronMaxCommunicators);
  if (!violations.empty())
    fail("compile: the HLO module {} breaks {}:\n{}", name,
         violations.size() == 1 ? "a Neuron conformance rule" : "Neuron conformance rules",
         neuron::describeViolations(violations));
  describeEntry(proto, params, outputs);
  neuron::HloStats stats = neuron::HloStats::of(proto);
  StageModule out;
  out.name = name;
  out.proto = proto.SerializeAsString();
  out.text = neuron::printHloText(proto);
  out.kernels = nkiKernelTable(proto, *config.target.name, config.target.lnc);
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

/// Lowers function `fn` of `module` (a copy: the lowering keeps only it) to
/// HLO, checks Neuron's conformance rules on it and describes its entry.
StageModule lowerModule(mlir::ModuleOp module, const std::string &fn, const std::string &name,
                        const KilnPipelineOptions &options, const ParallelLayout &layout,
                        const TrainConfig &config) {
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
  return packModule(name, fn, *proto, std::move(params), std::move(outputs), layout, config);
}

/// The replica groups a transfer from the ranks of pipeline rank `from` to
/// those of `to` (`inner` ranks each, of `pp`) runs over, and the block of
/// the gathered tensor the receiver keeps. As NxD's pipeline sends: an
/// all-gather over two-rank groups {sender, receiver}; every rank is listed
/// once, so the other pipeline ranks pair up too, and where they cannot (an
/// odd number of them) the whole pp axis gathers and the receiver keeps the
/// sender's block.
std::pair<std::vector<std::vector<int64_t>>, int64_t> transferGroups(int64_t from, int64_t to,
                                                                     int64_t pp, int64_t inner) {
  std::vector<int64_t> others;
  for (int64_t q = 0; q < pp; ++q)
    if (q != from && q != to)
      others.push_back(q);
  std::vector<std::vector<int64_t>> groups;
  if (others.size() % 2) {
    for (int64_t i = 0; i < inner; ++i) {
      groups.emplace_back();
      for (int64_t q = 0; q < pp; ++q)
        groups.back().push_back(q * inner + i);
    }
    return {groups, from};
  }
  for (int64_t i = 0; i < inner; ++i)
    groups.push_back({from * inner + i, to * inner + i});
  for (size_t k = 0; k + 1 < others.size(); k += 2)
    for (int64_t i = 0; i < inner; ++i)
      groups.push_back({others[k] * inner + i, others[k + 1] * inner + i});
  return {groups, 0};
}

/// The HLO module of one transfer, `name`(x, rank) -> x as the sender
/// holds it, on the receiving ranks (transferGroups). `param` is the
/// receiving module's manifest entry of the value (its shape, dtype,
/// number), `role` its role there ("transfer", "cotangent").
StageModule transferModule(mlir::MLIRContext &context, const std::string &name, const json &param,
                           const std::string &role, int64_t from, int64_t to,
                           const ParallelLayout &layout, const TrainConfig &config) {
  auto shape = param["shape"].get<std::vector<int64_t>>();
  std::string dtype = param["dtype"].get<std::string>();
  if (dtype != "bfloat16" && dtype != "float32")
    fail("compile: a pipeline transfer of {} is not built (float32 and bfloat16 are)", dtype);
  mlir::OpBuilder b(&context);
  mlir::Type element = dtype == "bfloat16" ? mlir::Type(b.getBF16Type()) : b.getF32Type();
  auto type = mlir::RankedTensorType::get(shape, element);
  auto [groups, keep] = transferGroups(from, to, layout.pp, layout.worldSize() / layout.pp);
  std::vector<int64_t> ids;
  for (const std::vector<int64_t> &g : groups)
    ids.insert(ids.end(), g.begin(), g.end());
  auto groupType = mlir::RankedTensorType::get(
      {int64_t(groups.size()), int64_t(groups.front().size())}, b.getI64Type());
  std::vector<int64_t> gathered = shape;
  gathered[0] *= int64_t(groups.front().size());

  context.loadDialect<mlir::func::FuncDialect, hlo::HloDialect>();
  mlir::Location loc = mlir::NameLoc::get(b.getStringAttr(name));
  mlir::OwningOpRef<mlir::ModuleOp> module = mlir::ModuleOp::create(loc);
  b.setInsertionPointToEnd(module->getBody());
  auto fn = mlir::func::FuncOp::create(
      b, loc, name,
      b.getFunctionType({type, mlir::RankedTensorType::get({}, b.getI32Type())}, {type}));
  int64_t number = param["number"].get<int64_t>();
  std::string attr = "kiln." + role;
  fn.setArgAttr(0, attr, b.getI64IntegerAttr(number));
  fn.setArgAttr(1, kRankAttr, b.getStringAttr(kRankParameter));
  fn.setResultAttr(0, attr, b.getI64IntegerAttr(number));
  b.setInsertionPointToStart(fn.addEntryBlock());
  mlir::Value all = hlo::AllGatherOp::create(
      b, loc, mlir::RankedTensorType::get(gathered, element), fn.getArgument(0), 0,
      mlir::DenseIntElementsAttr::get(groupType, llvm::ArrayRef<int64_t>(ids)), nullptr);
  std::vector<int64_t> start(shape.size(), 0), limit = shape, strides(shape.size(), 1);
  start[0] = keep * shape[0];
  limit[0] = start[0] + shape[0];
  mlir::Value kept = hlo::SliceOp::create(b, loc, type, all, start, limit, strides);
  mlir::func::ReturnOp::create(b, loc, kept);

  mlir::FailureOr<xla::HloModuleProto> proto;
  succeedOrFail(context, "exporting the pipeline transfer " + name + " failed", [&] {
    proto = neuron::exportHloModule(*module, name);
    return mlir::failure(mlir::failed(proto));
  });
  json params = json::array(), outputs = json::array();
  params.push_back({{"parameter", 0},
                    {"role", role},
                    {"number", number},
                    {"shape", shape},
                    {"whole_shape", param["whole_shape"]},
                    {"split", param["split"]}});
  outputs.push_back({{"index", 0}, {role, number}});
  StageModule out =
      packModule(name, name, *proto, std::move(params), std::move(outputs), layout, config);
  out.manifest["from_pp_rank"] = from;
  out.manifest["to_pp_rank"] = to;
  out.manifest["replica_groups"] = groups;
  out.manifest["kept_block"] = keep;
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

  // What crosses each boundary, between which ranks and by which module:
  // each activation the next stage's forward receives, each cotangent the
  // stage's backward receives back.
  std::vector<int64_t> grid = layout.shape();
  int64_t innerRanks = layout.worldSize() / layout.pp;
  json boundaries = json::array();
  std::map<std::pair<int64_t, bool>, std::vector<std::string>> transfersOf; // (stage, backward)
  for (int64_t b = 0; b + 1 < schedule.numStages(); ++b) {
    json tensors = json::array(), names = json::array();
    for (const json &o : modules[size_t(2 * b)].manifest["outputs"])
      if (o.contains("transfer"))
        tensors.push_back({{"transfer", o["transfer"]}, {"output", o["index"]}});
    int64_t from = schedule.rankOf(b), to = schedule.rankOf(b + 1);
    // The next stage's forward receives the activations; this stage's
    // backward the cotangents.
    for (bool backward : {false, true}) {
      const char *role = backward ? "cotangent" : "transfer";
      int64_t receiving = backward ? 2 * b + 1 : 2 * (b + 1);
      std::vector<json> received;
      for (const json &p : modules[size_t(receiving)].manifest["parameters"])
        if (p.value("role", "") == role)
          received.push_back(p);
      for (const json &p : received) {
        std::string name = fmt::format("{}_stage{}_{}", backward ? "cotangent" : "activation",
                                       backward ? b + 1 : b, p["number"].get<int64_t>());
        modules.push_back(transferModule(context, name, p, role, backward ? to : from,
                                         backward ? from : to, layout, config));
        transfersOf[{backward ? b + 1 : b, backward}].push_back(name);
        names.push_back(name);
      }
    }
    json pairs = json::array();
    for (int64_t i = 0; i < innerRanks; ++i)
      pairs.push_back({from * innerRanks + i, to * innerRanks + i});
    boundaries.push_back({{"from_stage", b},
                          {"to_stage", b + 1},
                          {"activations", tensors},
                          {"rank_pairs", pairs},
                          {"transfer_modules", names}});
  }
  json ranks = json::array();
  for (int64_t r = 0; r < layout.pp; ++r) {
    json actions = json::array();
    for (const PipelineAction &a : schedule.ranks[size_t(r)]) {
      json action{{"action", a.str()}};
      if (a.kind == PipelineActionKind::Forward || a.kind == PipelineActionKind::Backward)
        action["module"] = fmt::format(
            "stage{}_{}", a.stage, a.kind == PipelineActionKind::Forward ? "forward" : "backward");
      // A send and its receive run the boundary's transfer modules together.
      bool gradient =
          a.kind == PipelineActionKind::SendGradient || a.kind == PipelineActionKind::RecvGradient;
      bool send = a.kind == PipelineActionKind::SendActivation ||
                  a.kind == PipelineActionKind::SendGradient;
      if (!action.contains("module"))
        action["modules"] = transfersOf[{send ? a.stage : a.peerStage(), gradient}];
      actions.push_back(action);
    }
    json global = json::array();
    for (int64_t i = 0; i < innerRanks; ++i)
      global.push_back(r * innerRanks + i);
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
  // As the unpipelined manifest: the runtime lays each input's sequence out
  // head-tail before slicing it over cp.
  if (int64_t chunks = layout.sequenceLayout().headTailChunks)
    manifest["batch"]["head_tail_chunks"] = chunks;
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
       "a send and its receive run the boundary's transfer modules together, as NxD's "
       "pipeline sends: an all-gather over two-rank groups {sender, receiver} of which the "
       "receiver keeps the first block"}};
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
        writeFileAtomic(sub + "/kernels.json", m.kernels.dump(2) + "\n");
        bool bindKernels = !m.kernels["calls"].empty();
        if (bindKernels)
          writeFileAtomic(sub + "/bind_kernels.py", nkiBinderScript());
        writeFileAtomic(sub + "/compile.sh",
                        neuronCompileScript(config, m.communicators, bindKernels));
        ::chmod((sub + "/compile.sh").c_str(), 0755);
      }
      writeFileAtomic(dir + "/manifest.json", manifest.dump(2) + "\n");
      writeFileAtomic(dir + "/compile.sh", compileAll);
      ::chmod((dir + "/compile.sh").c_str(), 0755);
    });
  } catch (const std::filesystem::filesystem_error &e) {
    fail("compile: cannot write the artifacts to '{}': {}", outDir, e.what());
  }

  fmt::print(
      "compiled {} for {} (LNC {}) under pipeline parallelism: {} ranks (pp {} x "
      "dp_replicate {} x dp_shard {}{} x tp {}{}), {} stages under {}, {} microbatches of {} "
      "rows per data-parallel rank\n",
      model.name, wordOf(*config.target.name), config.target.lnc, layout.worldSize(), layout.pp,
      layout.dpReplicate, layout.dpShard, layout.cpSummary(), layout.tp,
      layout.expertsSummary().empty() ? "" : ", " + layout.expertsSummary(), schedule.numStages(),
      wordOf(schedule.kind), schedule.microbatches, layout.microbatchSize);
  for (const StageModule &m : modules)
    fmt::print("  {:<18} {:>7} HLO instructions, {} replica-group lists\n", m.name, m.instructions,
               m.communicators);
  fmt::print("Neuron conformance: all {} rules hold in every module\n",
             neuron::conformanceRules().size());
  fmt::print(
      "wrote {} modules (model.hlo.pb, model.hlo.txt, manifest.json, kernels.json, compile.sh "
      "each), "
      "the schedule (manifest.json) and compile.sh to {}\n",
      modules.size(), outDir);
}

} // namespace kiln
