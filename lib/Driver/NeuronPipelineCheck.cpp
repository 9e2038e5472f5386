//===- NeuronPipelineCheck.cpp - A pipelined run's HLO against the CPU -----===//
//
// kiln check-hlo on the folder kiln compile writes under pipeline
// parallelism: every module is evaluated (the reference HLO evaluator, every
// rank of the world) in the order a step runs them: each microbatch's
// forwards up the stages, what a stage sends moved to the next stage's
// ranks by the boundary's transfer module, its backwards down with the
// cotangents moved back the same way and the residuals each forward kept;
// each rank's gradients summed over the microbatches (a tied table's also
// between its pipeline ranks, as kiln train sums them); then every pipeline
// rank's update. The loss, the gradient norm and the weights put back
// together are held to one CPU rank's step on the whole batch.
//
//===----------------------------------------------------------------------===//

#include "kiln/Backend/Neuron/HloEvaluator.h"
#include "kiln/CustomKernels/Registry.h"
#include "kiln/Dialect/Hlo/IR/ReplicaGroups.h"
#include "kiln/Driver/CpuReferenceStep.h"
#include "kiln/Driver/HloRankArrays.h"
#include "kiln/Driver/NeuronCheck.h"
#include "kiln/Driver/NeuronManifest.h"
#include "kiln/Driver/NkiBinder.h"
#include "kiln/Driver/RankSlices.h"
#include "kiln/Driver/Training.h"
#include "kiln/Runtime/TokenBatch.h"
#include "kiln/Support/Error.h"
#include "kiln/Support/Json.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>

using json = nlohmann::json;

namespace kiln {

using neuron::HloArray;

namespace {

struct Module {
  xla::HloModuleProto proto;
  json manifest;
  /// The output index of each numbered role ("transfer", "residual",
  /// "cotangent") and named one ("grad", "param", "output").
  int64_t outputOf(const std::string &role, const json &value) const {
    for (const json &o : manifest["outputs"])
      if (o.contains(role) && o[role] == value)
        return o["index"].get<int64_t>();
    fail("check-hlo: module {} has no output {} {}", manifest.value("module", "?"), role,
         value.dump());
  }
};

Module loadModule(const std::string &dir) {
  Module m;
  std::string moduleFile = kilnModuleFile(dir);
  if (!m.proto.ParseFromString(readFile(moduleFile)))
    fail("check-hlo: {} is not a serialized xla.HloModuleProto", moduleFile);
  m.manifest = parseJson(readFile(dir + "/manifest.json"), dir + "/manifest.json");
  if (!m.manifest.contains("parameters") || !m.manifest.contains("outputs"))
    fail("check-hlo: {}/manifest.json needs 'parameters' and 'outputs'", dir);
  return m;
}

} // namespace

bool checkPipelinedNeuronArtifacts(const TrainConfig &config, const std::string &dir,
                                   double tolerance) {
  auto start = std::chrono::steady_clock::now();
  json top = parseJson(readFile(dir + "/manifest.json"), dir + "/manifest.json");
  const json &pipeline = top["pipeline"];
  int64_t world = top["world_size"].get<int64_t>(), pp = pipeline["degree"].get<int64_t>();
  int64_t stages = pipeline["stages"].get<int64_t>(), m = pipeline["microbatches"].get<int64_t>(),
          runs = pipeline["schedule_runs_per_step"].get<int64_t>();
  bool partitioned = pipeline["stage_partitioned"].get<bool>();
  SequenceLayout sequence = manifestSequenceLayout(top, dir + "/manifest.json");
  std::vector<int64_t> grid;
  std::vector<std::string> axisNames;
  for (const json &g : top["grid"]) {
    grid.push_back(g["size"].get<int64_t>());
    axisNames.push_back(g["axis"].get<std::string>());
  }
  const int64_t inner = world / pp;
  auto ppRankOf = [&](int64_t stage) { return stage % pp; };
  // The rank of pipeline rank `q` with rank `r`'s other coordinates.
  auto peer = [&](int64_t r, int64_t q) { return q * inner + r % inner; };
  std::map<std::string, Module> modules;
  for (const json &name : top["modules"])
    modules[name.get<std::string>()] = loadModule(dir + "/" + name.get<std::string>());
  registerCustomKernels();
  mlir::MLIRContext context;
  neuron::HloCustomCall customCalls = kernelCalls(context);

  // One step of the CPU runtime on one rank, on the whole batch.
  CpuReferenceStep reference = runCpuReferenceStep(config, top, runs);
  const TensorMap &initial = reference.initial, &updated = reference.updated;
  const StepMetrics &metrics = reference.metrics;
  const Tensor &tokens = reference.tokens;

  // The step's rows as kiln train splits them: per schedule run, per
  // data-parallel group, per microbatch.
  std::vector<int16_t> dpAxes;
  for (size_t a = 0; a < axisNames.size(); ++a)
    if (axisNames[a] == "dp_replicate" || axisNames[a] == "dp_shard" || axisNames[a] == "ep")
      dpAxes.push_back(int16_t(a));
  int64_t dp = top["batch"]["global"].get<int64_t>() / runs /
               top["batch"]["per_data_parallel_rank"].get<int64_t>();
  std::vector<InputsAndLabels> pieces = splitMicrobatches(tokens, runs * m * dp);
  // Rank r's value of data input `p` ("input_ids", "labels") in microbatch
  // (run, j): its data-parallel group's piece, or its slice of every
  // group's pieces stacked where the stage is partitioned.
  auto inputFor = [&](const json &p, int64_t run, int64_t j, int64_t r) {
    bool labels = p["name"] == "labels";
    InputsAndLabels rows =
        partitioned ? stackedMicrobatch(pieces, run, j, dp, m)
                    : microbatchPiece(pieces, run,
                                      dp > 1 ? hlo::gridGroupIndex(grid, dpAxes, r) : 0, j, dp, m);
    HloArray a = arrayOf(laidOutSequence(labels ? rows.labels : rows.inputIds, sequence));
    if (partitioned)
      a = sliceFor(a, p, grid, axisNames, r);
    a.type = xla::S32; // the module's integers
    return a;
  };
  auto paramFor = [&](const json &p, int64_t r) {
    auto whole = p["whole_shape"].get<std::vector<int64_t>>();
    return sliceFor(
        arrayOf(paramByKey(initial, p["name"].get<std::string>(), whole.empty() ? 0 : whole[0])), p,
        grid, axisNames, r);
  };
  auto zerosFor = [&](const json &p) {
    return zeros(p["shape"].get<std::vector<int64_t>>(),
                 p.value("dtype", "") == "int32" ? xla::S32 : xla::F32);
  };

  // results[(module, run, j)][rank]
  std::map<std::tuple<std::string, int64_t, int64_t>, std::vector<std::vector<HloArray>>> results;
  // Each rank's gradients by key, summed over the microbatches.
  std::vector<std::map<std::string, HloArray>> grads(world);
  double lossSum = 0;
  auto evaluate = [&](const std::string &name, int64_t stage, int64_t run, int64_t j) {
    const Module &mod = modules.at(name);
    bool backward = name.find("_backward") != std::string::npos;
    // What it receives moves by the boundary's transfer module (NxD's
    // all-gather over {sender, receiver}), evaluated once per microbatch:
    // the sender's ranks feed their output, the others zeros.
    auto transferName = [&](const std::string &role, int64_t number) {
      bool cotangent = role == "cotangent";
      return fmt::format("{}_stage{}_{}", cotangent ? "cotangent" : "activation",
                         cotangent ? stage + 1 : stage - 1, number);
    };
    for (const json &p : mod.manifest["parameters"]) {
      std::string role = p.value("role", "");
      if (role != "transfer" && role != "cotangent")
        continue;
      std::string moved = transferName(role, p["number"].get<int64_t>());
      if (results.count({moved, run, j}))
        continue;
      int64_t sender = role == "cotangent" ? stage + 1 : stage - 1;
      std::string from =
          fmt::format("stage{}_{}", sender, role == "cotangent" ? "backward" : "forward");
      int64_t index = modules.at(from).outputOf(role, p["number"]);
      std::vector<std::vector<HloArray>> sent(world);
      for (int64_t r = 0; r < world; ++r)
        sent[r] = {r / inner == ppRankOf(sender) ? results.at({from, run, j})[r][index]
                                                 : zerosFor(p),
                   HloArray{xla::S32, {}, {double(r)}}};
      results[{moved, run, j}] = neuron::evaluateHlo(modules.at(moved).proto, sent, customCalls);
    }
    std::vector<std::vector<HloArray>> args(world);
    for (int64_t r = 0; r < world; ++r) {
      bool here = r / inner == ppRankOf(stage);
      for (const json &p : mod.manifest["parameters"]) {
        std::string role = p.value("role", "");
        if (role == "rank") {
          args[r].push_back(HloArray{xla::S32, {}, {double(r)}});
        } else if (!here) {
          args[r].push_back(zerosFor(p)); // another pipeline rank's: not this stage's
        } else if (role == "param") {
          args[r].push_back(paramFor(p, r));
        } else if (role == "input") {
          args[r].push_back(inputFor(p, run, j, r));
        } else if (role == "transfer" || role == "cotangent") { // moved to this rank
          args[r].push_back(
              results.at({transferName(role, p["number"].get<int64_t>()), run, j})[r][0]);
        } else if (role == "residual") { // this stage's forward kept it
          const Module &fwd = modules.at(fmt::format("stage{}_forward", stage));
          args[r].push_back(results.at({fmt::format("stage{}_forward", stage), run,
                                        j})[r][fwd.outputOf("residual", p["number"])]);
        } else {
          fail("check-hlo: module {} parameter {} ('{}') has no value to feed", name,
               p["parameter"].dump(), role);
        }
      }
    }
    std::vector<std::vector<HloArray>> out = neuron::evaluateHlo(mod.proto, args, customCalls);
    for (const json &o : mod.manifest["outputs"]) {
      int64_t index = o["index"].get<int64_t>();
      if (o.value("output", "") == "loss")
        lossSum += out[size_t(ppRankOf(stage) * inner)][index].values[0];
      if (!backward || !o.contains("grad"))
        continue;
      for (int64_t r = ppRankOf(stage) * inner; r < (ppRankOf(stage) + 1) * inner; ++r) {
        auto [it, added] = grads[r].emplace(o["grad"].get<std::string>(), out[r][index]);
        if (!added)
          for (size_t i = 0; i < it->second.values.size(); ++i)
            it->second.values[i] += out[r][index].values[i];
      }
    }
    results[{name, run, j}] = std::move(out);
  };
  for (int64_t run = 0; run < runs; ++run)
    for (int64_t j = 0; j < m; ++j) {
      for (int64_t s = 0; s < stages; ++s)
        evaluate(fmt::format("stage{}_forward", s), s, run, j);
      for (int64_t s = stages - 1; s >= 0; --s)
        evaluate(fmt::format("stage{}_backward", s), s, run, j);
    }
  // A parameter on several pipeline ranks (a tied table): its gradient
  // summed between them, each rank with its peers of the same coordinates.
  std::vector<std::map<std::string, HloArray>> summed = grads;
  for (int64_t r = 0; r < world; ++r)
    for (auto &[key, g] : summed[r])
      for (int64_t q = 0; q < pp; ++q)
        if (q != r / inner)
          if (auto it = grads[peer(r, q)].find(key); it != grads[peer(r, q)].end())
            for (size_t i = 0; i < g.values.size(); ++i)
              g.values[i] += it->second.values[i];

  // Every pipeline rank's update; the weights put back together from the
  // ranks of the first pipeline rank holding each. The evaluator runs one
  // module on every rank, so each update sees only its own pipeline rank's
  // share of the norm's squares (the others' ranks feed zeros): the norm is
  // put together from the shares, and the weights hold only while clipping
  // does not act.
  if (metrics.gradNorm > config.training.maxNorm)
    fail("check-hlo: the step clips its gradients (norm {:.6g} above training.max_norm {:g}), "
         "and the clipping of each pipeline rank's update needs every pipeline rank's share of "
         "the norm at once, which evaluating one module at a time cannot give; compile and "
         "check with training.max_norm above the norm",
         metrics.gradNorm, config.training.maxNorm);
  double normSquares = 0, worstWeight = 0;
  std::string worstKey;
  std::map<std::string, bool> compared;
  for (int64_t q = 0; q < pp; ++q) {
    const Module &mod = modules.at(fmt::format("update_pp{}", q));
    std::vector<std::vector<HloArray>> args(world);
    std::map<std::string, json> entry;
    for (int64_t r = 0; r < world; ++r)
      for (const json &p : mod.manifest["parameters"]) {
        std::string role = p.value("role", "");
        if (role == "rank")
          args[r].push_back(HloArray{xla::S32, {}, {double(r)}});
        else if (r / inner != q || role == "state")
          args[r].push_back(zerosFor(p)); // another pipeline rank's; a fresh moment, step 0
        else if (role == "param")
          args[r].push_back(paramFor(p, r));
        else if (role == "grad")
          args[r].push_back(summed[r].at(p["name"].get<std::string>()));
        else
          fail("check-hlo: update_pp{} parameter {} ('{}') has no value to feed", q,
               p["parameter"].dump(), role);
      }
    for (const json &p : mod.manifest["parameters"])
      if (p.value("role", "") == "param")
        entry[p["name"].get<std::string>()] = p;
    std::vector<std::vector<HloArray>> out = neuron::evaluateHlo(mod.proto, args, customCalls);
    for (const json &o : mod.manifest["outputs"]) {
      int64_t index = o["index"].get<int64_t>();
      if (o.value("output", "") == "grad_norm")
        normSquares +=
            out[size_t(q * inner)][index].values[0] * out[size_t(q * inner)][index].values[0];
      if (!o.contains("param") || compared[o["param"].get<std::string>()])
        continue;
      std::string key = o["param"].get<std::string>();
      compared[key] = true;
      const json &p = entry.at(key);
      HloArray whole = wholeFromBlocks(p, out, index, q * inner, (q + 1) * inner, grid, axisNames);
      double d = maxAbsDiff(whole, paramByKey(updated, key, whole.dims[0]));
      if (d >= worstWeight) {
        worstWeight = d;
        worstKey = key;
      }
    }
  }
  double loss = lossSum / double(m * runs), gradNorm = std::sqrt(normSquares);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  double lossDiff = std::fabs(loss - metrics.loss),
         normDiff = std::fabs(gradNorm - metrics.gradNorm);
  fmt::print("evaluated {} modules of {} on {} ranks as the schedule runs them ({} stages x {} "
             "microbatches x {} run{}), in {:.1f} s\n",
             modules.size(), dir, world, stages, m, runs, runs > 1 ? "s" : "", seconds);
  fmt::print("loss       HLO {:.8f}  CPU {:.8f}  |diff| {:.2e}\n", loss, metrics.loss, lossDiff);
  fmt::print("grad_norm  HLO {:.8f}  CPU {:.8f}  |diff| {:.2e} (from the {} pipeline ranks' "
             "shares)\n",
             gradNorm, metrics.gradNorm, normDiff, pp);
  fmt::print("weights after the step: max |diff| {:.2e} ({}) over {} tensors\n", worstWeight,
             worstKey, compared.size());
  bool ok = lossDiff <= tolerance * std::max(1.0, std::fabs(metrics.loss)) &&
            normDiff <= tolerance * std::max(1.0, std::fabs(metrics.gradNorm)) &&
            worstWeight <= tolerance;
  fmt::print("{} (tolerance {:g})\n", ok ? "match" : "MISMATCH", tolerance);
  return ok;
}

} // namespace kiln
