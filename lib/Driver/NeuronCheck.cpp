//===- NeuronCheck.cpp - The emitted HLO against the CPU runtime ----------===//
//
// Each rank's arguments come from the whole tensors the way the manifest
// says a trn2 launcher must feed them: rank r holds, along every split
// dimension, block gridGroupIndex(r, axes) (after zero-padding to
// padded_to); the updated weights are put back together the same way.
//
//===----------------------------------------------------------------------===//

#include "kiln/Driver/NeuronCheck.h"
#include "kiln/Backend/Neuron/HloEvaluator.h"
#include "kiln/CustomKernels/Registry.h"
#include "kiln/Dialect/Hlo/IR/ReplicaGroups.h"
#include "kiln/Driver/CompiledStep.h"
#include "kiln/Driver/CpuReferenceStep.h"
#include "kiln/Driver/HloKernelCall.h"
#include "kiln/Driver/HloRankArrays.h"
#include "kiln/Driver/NeuronManifest.h"
#include "kiln/Driver/NkiBinder.h"
#include "kiln/Driver/RankSlices.h"
#include "kiln/Driver/Training.h"
#include "kiln/Runtime/HfCheckpoint.h"
#include "kiln/Runtime/TokenBatch.h"
#include "kiln/Support/Error.h"
#include "kiln/Support/Json.h"

#include "mlir/IR/MLIRContext.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>

using json = nlohmann::json;

namespace kiln {
namespace {

using neuron::HloArray;

/// The arrays as one little-endian file (float32, or int32 for integer
/// types) and their index entries (dtype, shape, byte offset).
std::string packArrays(const std::vector<HloArray> &arrays, json &index) {
  std::string bytes;
  index = json::array();
  for (const HloArray &a : arrays) {
    bool integer = a.type == xla::S32 || a.type == xla::S64 || a.type == xla::U32 ||
                   a.type == xla::PRED;
    index.push_back({{"dtype", integer ? "int32" : "float32"}, {"shape", a.dims},
                     {"offset", bytes.size()}});
    for (double v : a.values) {
      char word[4];
      if (integer) {
        int32_t i = int32_t(v);
        std::memcpy(word, &i, 4);
      } else {
        float f = float(v);
        std::memcpy(word, &f, 4);
      }
      bytes.append(word, 4);
    }
  }
  return bytes;
}

/// Every rank's arguments and the evaluator's results, for another XLA
/// implementation to run the module on and compare (scripts/check-hlo-xla.py).
void saveRankIo(const std::string &dir, const std::vector<std::vector<HloArray>> &args,
                const std::vector<std::vector<HloArray>> &results, double loss, double gradNorm) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec)
    fail("check-hlo: cannot create '{}': {}", dir, ec.message());
  json ranks = json::array();
  for (size_t r = 0; r < args.size(); ++r) {
    json inputs, outputs;
    std::string file = fmt::format("rank{}.bin", r);
    std::string bytes = packArrays(args[r], inputs);
    std::string outBytes = packArrays(results[r], outputs);
    for (json &o : outputs)
      o["offset"] = o["offset"].get<size_t>() + bytes.size();
    writeFileAtomic(dir + "/" + file, bytes + outBytes);
    ranks.push_back({{"file", file}, {"inputs", inputs}, {"outputs", outputs}});
  }
  json io{{"ranks", ranks}, {"cpu_runtime", {{"loss", loss}, {"grad_norm", gradNorm}}}};
  writeFileAtomic(dir + "/io.json", io.dump(1) + "\n");
}


/// Rank 0's results of the module compiled for the CPU (one rank only: the
/// evaluator runs every rank in this process, a compiled rank needs its own).
std::vector<HloArray> runCompiled(const std::string &dir,
                                  const std::vector<std::vector<HloArray>> &args) {
  if (args.size() != 1)
    fail("check-hlo --backend compiled: {}/model.hlo.pb is a {}-rank program; check-hlo "
         "compiles one rank (its collectives need a process per rank: kiln train "
         "--compile.enable=true under mpiexec trains this layout compiled)",
         dir, args.size());
  CompiledStep step = compileHloStep(dir + "/model.hlo.mlir");
  std::vector<Tensor> inputs;
  for (const HloArray &a : args[0])
    inputs.push_back(tensorOf(a));
  auto start = std::chrono::steady_clock::now();
  std::vector<Tensor> outputs = step(inputs);
  double run = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  fmt::print("compiled {}/model.hlo.mlir for the CPU: lowering {:.2f} s, LLVM {:.2f} s; one "
             "step ran in {:.3f} s\n",
             dir, step.lowerSeconds, step.function->compileSeconds(), run);
  std::vector<HloArray> results;
  for (const Tensor &t : outputs)
    results.push_back(arrayOf(t));
  return results;
}

} // namespace

bool checkNeuronArtifacts(const TrainConfig &config, const std::string &dir, double tolerance,
                          const std::string &saveIo, HloBackend backend) {
  // The reference is one rank's dropless step: a capacity that drops pairs
  // (which ones depends on the ranks' token chunks) would differ from it.
  if (config.parallelism.expertDispatch == ExpertDispatcher::AllToAll &&
      config.parallelism.expertCapacityFactor > 0)
    fail("check-hlo: parallelism.expert_capacity_factor={:g} may drop routed pairs, and the CPU "
         "reference (one rank, every pair kept) cannot follow; compile with 0 (dropless) to "
         "check the all-to-all dispatcher",
         config.parallelism.expertCapacityFactor);
  auto start = std::chrono::steady_clock::now();
  xla::HloModuleProto module;
  std::string moduleFile = kilnModuleFile(dir);
  std::string bytes = readFile(moduleFile);
  if (!module.ParseFromString(bytes))
    fail("check-hlo: {} is not a serialized xla.HloModuleProto", moduleFile);
  registerCustomKernels();
  mlir::MLIRContext context;
  neuron::HloCustomCall customCalls = kernelCalls(context);
  json manifest = parseJson(readFile(dir + "/manifest.json"), dir + "/manifest.json");
  validateManifest(manifest, module, dir + "/manifest.json");
  std::vector<int64_t> grid;
  std::vector<std::string> axisNames;
  for (const json &g : manifest["grid"]) {
    grid.push_back(g["size"].get<int64_t>());
    axisNames.push_back(g["axis"].get<std::string>());
  }
  int64_t world = manifest["world_size"].get<int64_t>();

  // One step of the CPU runtime on one rank, on the whole batch.
  // (validateManifest refused any other precision word.)
  int64_t microbatches = manifest["batch"].value("microbatches", int64_t(1));
  CpuReferenceStep reference = runCpuReferenceStep(config, manifest, microbatches);
  const TensorMap &initial = reference.initial, &updated = reference.updated;
  const StepMetrics &metrics = reference.metrics;
  std::vector<InputsAndLabels> io = splitMicrobatches(reference.tokens, microbatches);

  // Every rank's arguments, as the manifest says to feed them: the inputs'
  // sequences laid out for context parallelism first.
  SequenceLayout sequence = manifestSequenceLayout(manifest, dir + "/manifest.json");
  std::vector<std::vector<HloArray>> args(world);
  for (const json &p : manifest["parameters"]) {
    std::string role = p.value("role", ""), name = p.value("name", "");
    if (role == "rank") { // each rank its global id
      for (int64_t r = 0; r < world; ++r)
        args[r].push_back(HloArray{xla::S32, {}, {double(r)}});
      continue;
    }
    auto wholeShape = p["whole_shape"].get<std::vector<int64_t>>();
    HloArray whole;
    if (role == "param")
      whole = arrayOf(paramByKey(initial, name, wholeShape.empty() ? 0 : wholeShape[0]));
    else if (role == "input" && name == "input_ids")
      whole = arrayOf(laidOutSequence(io.at(p.value("microbatch", size_t(0))).inputIds, sequence));
    else if (role == "input" && name == "labels")
      whole = arrayOf(laidOutSequence(io.at(p.value("microbatch", size_t(0))).labels, sequence));
    else if (role == "state")
      whole = zeros(wholeShape, name == "step" ? xla::S64 : xla::F32);
    else
      fail("check-hlo: manifest parameter {} ('{}') has no value to feed", p["parameter"].dump(),
           name);
    if (whole.dims != wholeShape)
      fail("check-hlo: '{}' is {} here but {} in the manifest", name, json(whole.dims).dump(),
           json(wholeShape).dump());
    if (p.value("dtype", "") == "int32") // the module's integers are s32
      whole.type = xla::S32;
    for (int64_t r = 0; r < world; ++r)
      args[r].push_back(sliceFor(whole, p, grid, axisNames, r));
  }
  std::vector<std::vector<HloArray>> results =
      backend == HloBackend::Compiled ? std::vector<std::vector<HloArray>>{runCompiled(dir, args)}
                                      : neuron::evaluateHlo(module, args, customCalls);
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  // The outputs: the loss and norm of rank 0, the weights put back together.
  std::map<std::string, json> paramEntry;
  for (const json &p : manifest["parameters"])
    if (p.contains("name"))
      paramEntry[p["name"].get<std::string>()] = p;
  double loss = 0, gradNorm = 0, worstWeight = 0;
  std::string worstKey;
  for (const json &o : manifest["outputs"]) {
    int64_t index = o["index"].get<int64_t>();
    if (o.value("output", "") == "loss")
      loss = results[0][index].values[0];
    if (o.value("output", "") == "grad_norm")
      gradNorm = results[0][index].values[0];
    if (!o.contains("param"))
      continue;
    std::string key = o["param"].get<std::string>();
    const json &p = paramEntry.at(key);
    HloArray whole = wholeFromBlocks(p, results, index, 0, world, grid, axisNames);
    double d = maxAbsDiff(whole, paramByKey(updated, key, whole.dims[0]));
    if (d >= worstWeight) {
      worstWeight = d;
      worstKey = key;
    }
  }
  double lossDiff = std::fabs(loss - metrics.loss),
         normDiff = std::fabs(gradNorm - metrics.gradNorm);
  if (backend == HloBackend::Evaluator)
    fmt::print("evaluated {} on {} rank{} in {:.1f} s\n", moduleFile, world, world > 1 ? "s" : "",
               seconds);
  fmt::print("loss       HLO {:.8f}  CPU {:.8f}  |diff| {:.2e}\n", loss, metrics.loss, lossDiff);
  fmt::print("grad_norm  HLO {:.8f}  CPU {:.8f}  |diff| {:.2e}\n", gradNorm, metrics.gradNorm,
             normDiff);
  fmt::print("weights after the step: max |diff| {:.2e} ({})\n", worstWeight, worstKey);
  bool ok = lossDiff <= tolerance * std::max(1.0, std::fabs(metrics.loss)) &&
            normDiff <= tolerance * std::max(1.0, std::fabs(metrics.gradNorm)) &&
            worstWeight <= tolerance;
  fmt::print("{} (tolerance {:g})\n", ok ? "match" : "MISMATCH", tolerance);
  if (!saveIo.empty()) {
    saveRankIo(saveIo, args, results, metrics.loss, metrics.gradNorm);
    fmt::print("wrote every rank's arguments and results to {}\n", saveIo);
  }
  return ok;
}

} // namespace kiln
