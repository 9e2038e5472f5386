//===- CpuCompile.cpp - kiln compile --target cpu: the step, ahead of time ===//
//
// capture -> ... -> kiln-lower-to-hlo (lowerToHloStep, as kiln train
// --compile.enable=true) -> model.hlo.mlir; then the pipeline's Linalg and
// Llvm stages and MLIR's engine -> train_step.o, with the manifest a run
// checks before it links the object (linkCpuArtifact).
//
//===----------------------------------------------------------------------===//

#include "kiln/Driver/CpuCompile.h"
#include "kiln/Driver/CompileArtifacts.h"
#include "kiln/Driver/ParallelLayout.h"
#include "kiln/Driver/PipelineConfig.h"
#include "kiln/Driver/Training.h"
#include "kiln/Support/AtomicDirectory.h"
#include "kiln/Support/Error.h"
#include "kiln/Support/Fnv128.h"
#include "kiln/Support/Json.h"
#include "kiln/Support/Seconds.h"
#include "kiln/Support/Version.h"

#include "mlir/IR/MLIRContext.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/TargetParser/Host.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <unistd.h>

using namespace mlir;
using json = nlohmann::json;

namespace kiln {
namespace {

constexpr const char *kFormat = "kiln compile --target cpu, version 1";
constexpr const char *kObjectFile = "train_step.o";

/// The CPU the code is generated for (MLIR's engine targets the host): its
/// triple, name and the features LLVM may use.
json hostCpu() {
  std::vector<std::string> features;
  for (const auto &feature : llvm::sys::getHostCPUFeatures())
    if (feature.getValue())
      features.push_back(feature.getKey().str());
  std::sort(features.begin(), features.end());
  return {{"triple", llvm::sys::getProcessTriple()},
          {"cpu", llvm::sys::getHostCPUName().str()},
          {"features", features}};
}

std::string fingerprint(const std::string &bytes) {
  Fnv128 hash;
  hash.bytes(bytes.data(), bytes.size());
  return hash.hex();
}

/// The fingerprint of the printed @train_step, with its instructions' fqns
/// (not the module: its location is the model's path, which the step does
/// not depend on).
std::string stepFingerprint(ModuleOp hloStep) {
  auto step = hloStep.lookupSymbol<func::FuncOp>("train_step");
  if (!step)
    fail("compile: the hlo step has no func.func @train_step");
  std::string text;
  llvm::raw_string_ostream os(text);
  step->print(os, OpPrintingFlags().enableDebugInfo(/*enable=*/true, /*prettyForm=*/false));
  return fingerprint(text);
}

/// The first leaf where `have` and `want` differ, as "a.b.c" (array
/// elements by index); empty when they are equal. Objects compare their
/// most telling keys first: the build, then what a user chose (model,
/// layout, batch, precision), then the program.
std::string firstDifference(const json &have, const json &want, const std::string &path) {
  if (have.is_object() && want.is_object()) {
    std::vector<std::string> keys;
    for (const char *first :
         {"kiln_version", "model", "architectures", "layout", "batch", "precision"})
      if (want.contains(first))
        keys.push_back(first);
    for (const auto &[key, value] : want.items())
      if (std::find(keys.begin(), keys.end(), key) == keys.end())
        keys.push_back(key);
    for (const std::string &key : keys) {
      std::string at = path.empty() ? key : path + "." + key;
      if (!have.contains(key))
        return at;
      std::string d = firstDifference(have[key], want[key], at);
      if (!d.empty())
        return d;
    }
    for (const auto &[key, value] : have.items())
      if (!want.contains(key))
        return path.empty() ? key : path + "." + key;
    return "";
  }
  if (have.is_array() && want.is_array() && have.size() == want.size()) {
    for (size_t i = 0; i < want.size(); ++i) {
      std::string d = firstDifference(have[i], want[i], path + "[" + std::to_string(i) + "]");
      if (!d.empty())
        return d;
    }
    return "";
  }
  return have == want ? "" : path;
}

/// The value at a firstDifference path, printed ("(none)" when absent).
std::string valueAt(const json &root, const std::string &path) {
  const json *at = &root;
  std::string rest = path;
  while (!rest.empty()) {
    size_t cut = rest.find_first_of(".[");
    if (cut == 0 && rest[0] == '[') {
      size_t close = rest.find(']');
      size_t index = std::stoul(rest.substr(1, close - 1));
      if (!at->is_array() || index >= at->size())
        return "(none)";
      at = &(*at)[index];
      rest = rest.substr(close + 1);
    } else {
      std::string key = rest.substr(0, cut);
      if (!at->is_object() || !at->contains(key))
        return "(none)";
      at = &(*at)[key];
      rest = cut == std::string::npos ? "" : rest.substr(cut);
    }
    if (!rest.empty() && rest[0] == '.')
      rest = rest.substr(1);
  }
  return at->is_string() ? at->get<std::string>() : at->dump();
}

std::string readme(const std::string &modelName) {
  return fmt::format(R"(Kiln's compiled training step for the CPU (kiln compile --target cpu)

train_step.o   the per-rank training step of {} (forward, loss, backward,
               gradient clipping, AdamW, collectives) as native code for the
               CPU it was compiled on: a relocatable object (ELF) whose entry
               _mlir_train_step takes each argument's memref words packed
model.hlo.mlir the hlo module it was compiled from (Kiln's hlo dialect, with
               each instruction's kiln fqn)
manifest.json  what a run checks before linking the object (identity: Kiln
               version, model, layout, batch, precision, the hlo step's
               fingerprint; host: the CPU features the code uses), the entry
               parameters and outputs, and the object's size and fingerprint

Train with it:  kiln train --config <the same run> --compile.enable=true \
                  --compile.artifact=<this folder>
A run whose step differs is refused, naming what differs; see docs/compiled.md.
)",
                     modelName);
}

} // namespace

json cpuStepIdentity(const TrainConfig &config, const Qwen3Config &model,
                     const ParallelLayout &layout, const KilnPipelineOptions &options,
                     ModuleOp hloStep) {
  json grid = json::object();
  std::vector<int64_t> shape = layout.shape();
  std::vector<std::string> axes = layout.axisNames();
  for (size_t a = 0; a < shape.size(); ++a)
    grid[axes[a]] = shape[a];
  int64_t dp = layout.dataParallelDegree();
  return {{"kiln_version", kilnVersion()},
          // The model's shape, not its name or path: the weights are the
          // run's to load.
          {"model", json::parse(model.toHfConfigJson())},
          {"layout", {{"world_size", layout.worldSize()}, {"grid", grid}}},
          {"batch",
           {{"global", config.training.globalBatch(dp)},
            {"per_data_parallel_rank", config.training.localBatchSize},
            {"microbatches", config.training.microbatches(dp)},
            {"seq_len", config.training.seqLen}}},
          {"precision",
           {{"param", wordOf(PrecisionDtype(options.paramDtype))},
            {"reduce", wordOf(config.training.mixedPrecisionReduce)}}},
          {"step_fingerprint", stepFingerprint(hloStep)}};
}

void compileForCpu(const TrainConfig &given, const std::string &outDir) {
  given.refusePlanOnly("compile");
  Clock::time_point start = Clock::now();
  TrainConfig config = given;
  Qwen3Config model = config.model.resolve();
  // The shape kiln train gives the run (a token file's where unset).
  ParallelLayout layout = resolveRunLayout(config, model, 1);
  int64_t seq = config.training.seqLen;
  int64_t dp = layout.dataParallelDegree();
  std::optional<FileLock> lock;
  lockOutputFolder(outDir, lock);
  // The step kiln train --compile.enable=true builds (Trainer).
  std::unique_ptr<KilnPipelineOptions> options =
      pipelineOptions(config, model, &layout, PrecisionDtype::Float32, TargetName::Cpu);
  MLIRContext context;
  OwningOpRef<ModuleOp> module =
      captureTrainingStep(context, model, {config.training.localBatchSize * dp, seq}, *options);
  auto step = module->lookupSymbol<func::FuncOp>("train_step");
  auto loss = module->lookupSymbol<func::FuncOp>("loss");
  json manifest;
  manifest["format"] = kFormat;
  manifest["parameters"] = describeParameters(step, loss, layout.shape(), layout.axisNames());
  manifest["parameters"].push_back({{"parameter", step.getNumArguments()},
                                    {"role", "rank"},
                                    {"name", "rank"},
                                    {"shape", json::array()}});
  manifest["outputs"] = describeOutputs(step);
  OwningOpRef<ModuleOp> hloStep = lowerToHloStep(*module, *options, model.name);
  double captureSeconds = secondsSince(start);
  std::string hloText = printHloStep(*hloStep);
  manifest["identity"] = cpuStepIdentity(config, model, layout, *options, *hloStep);
  manifest["host"] = hostCpu();

  Clock::time_point t = Clock::now();
  double lowerSeconds = 0;
  std::unique_ptr<CompiledFunction> function =
      compileHloStepCode(*hloStep, "the training step of " + model.name, &lowerSeconds);
  double compileSeconds = secondsSince(t) - lowerSeconds;
  manifest["function"] = {{"name", "train_step"},
                          {"out_param_buffers", function->outParamBuffers()},
                          {"threaded_loop_nests", function->threadedLoopNestNames()}};

  t = Clock::now();
  int64_t objectBytes = 0;
  try {
    writeDirectoryAtomic(outDir, [&](const std::string &dir) {
      std::string objectPath = dir + "/" + kObjectFile;
      function->writeObject(objectPath);
      std::string object = readFile(objectPath);
      objectBytes = int64_t(object.size());
      manifest["object"] = {
          {"file", kObjectFile}, {"bytes", objectBytes}, {"fnv128", fingerprint(object)}};
      writeFileAtomic(dir + "/model.hlo.mlir", hloText);
      writeFileAtomic(dir + "/manifest.json", manifest.dump(2) + "\n");
      writeFileAtomic(dir + "/README.txt", readme(model.name));
      if (config.debug.killDuringCompile)
        ::kill(::getpid(), SIGKILL);
    });
  } catch (const std::filesystem::filesystem_error &e) {
    fail("compile: cannot write the artifacts to '{}': {}", outDir, e.what());
  }
  double writeSeconds = secondsSince(t);

  const json &host = manifest["host"];
  int64_t microbatches = config.training.microbatches(dp);
  fmt::print("compiled {} for this CPU ({}, {}): {} rank{} (dp_replicate {} x dp_shard {} x tp "
             "{}{}), batch {} x seq {}{}\n",
             model.name, host["triple"].get<std::string>(), host["cpu"].get<std::string>(),
             layout.worldSize(), layout.worldSize() > 1 ? "s" : "", layout.dpReplicate,
             layout.dpShard, layout.tp,
             layout.expertsSummary().empty() ? "" : ", " + layout.expertsSummary(),
             config.training.globalBatch(dp), seq,
             microbatches > 1 ? fmt::format(" in {} microbatches", microbatches) : "");
  fmt::print("precision: {} parameters and matmuls (training.mixed_precision_param)\n",
             wordOf(PrecisionDtype(options->paramDtype)));
  fmt::print("object: {}, {:.1f} MB of native code; {} loop nests threaded\n", kObjectFile,
             double(objectBytes) / 1e6, function->threadedLoopNests());
  fmt::print("time: capture+passes+HLO {:.2f} s, lower to LLVM {:.2f} s, code generation "
             "{:.2f} s, write {:.2f} s\n",
             captureSeconds, lowerSeconds, compileSeconds, writeSeconds);
  fmt::print("wrote {}/{{{}, model.hlo.mlir, manifest.json, README.txt}}\n", outDir, kObjectFile);
  fmt::print("train it: kiln train <this run's options> --compile.enable=true "
             "--compile.artifact={}\n",
             outDir);
}

CompiledStep linkCpuArtifact(const std::string &dir, const json &identity, ModuleOp hloStep,
                             DeviceGrid *grid) {
  namespace fs = std::filesystem;
  std::string what = "compile.artifact '" + dir + "'";
  std::string manifestPath = (fs::path(dir) / "manifest.json").string();
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    fail("{}: no such folder (kiln compile --target cpu -o DIR writes one)", what);
  if (!fs::exists(manifestPath, ec))
    fail("{}: no manifest.json, so it is not a kiln compile --target cpu folder", what);
  json manifest = parseJson(readFile(manifestPath), manifestPath);
  if (!manifest.is_object() || manifest.value("format", json()) != kFormat)
    fail("{}: '{}' is not a CPU artifact's manifest (\"format\" is not \"{}\"; a Neuron "
         "folder is for neuronx-cc); compile with --target cpu",
         what, manifestPath, kFormat);
  auto field = [&](const char *key) -> const json & {
    if (!manifest.contains(key) || !manifest[key].is_object())
      fail("{}: '{}' has no object \"{}\"", what, manifestPath, key);
    return manifest[key];
  };

  // The run's own step, or refused naming what differs.
  const json &have = field("identity");
  std::string differs = firstDifference(have, identity, "");
  if (!differs.empty()) {
    std::string hint =
        differs == "step_fingerprint"
            ? " (the model, layout, batch and precision agree: another option that changes "
              "the program differs, e.g. the optimizer, the learning-rate schedule, the "
              "kernels or activation checkpointing)"
            : "";
    fail("{} is not this run's step: it was compiled with {} = {}, this run has {}{}; compile "
         "it again with this run's options (kiln compile --target cpu -o {})",
         what, differs, valueAt(have, differs), valueAt(identity, differs), hint, dir);
  }
  // Code for this CPU: every feature it may use is here.
  const json &host = field("host");
  json here = hostCpu();
  if (host.value("triple", json()) != here["triple"])
    fail("{} was compiled for {}, this machine is {}; compile it here", what,
         host.value("triple", json()).dump(), here["triple"].get<std::string>());
  std::vector<std::string> missing;
  const json &features = host.value("features", json::array());
  for (const json &f : features)
    if (!f.is_string() ||
        std::find(here["features"].begin(), here["features"].end(), f) == here["features"].end())
      missing.push_back(f.is_string() ? f.get<std::string>() : f.dump());
  if (!missing.empty())
    fail("{} was compiled for a CPU ({}) with features this one ({}) lacks: {}; compile it on "
         "this machine",
         what, host.value("cpu", json()).dump(), here["cpu"].get<std::string>(),
         fmt::format("{}", fmt::join(missing, ", ")));

  // The object as written.
  const json &object = field("object");
  std::string objectPath = (fs::path(dir) / kObjectFile).string();
  if (!fs::exists(objectPath, ec))
    fail("{}: {} is missing", what, kObjectFile);
  std::string bytes = readFile(objectPath);
  if (object.value("bytes", json()) != json(bytes.size()) ||
      object.value("fnv128", json()) != json(fingerprint(bytes)))
    fail("{}: {} is not the object kiln compile wrote ({} bytes, its manifest says {}): "
         "truncated or replaced; compile again",
         what, kObjectFile, bytes.size(), object.value("bytes", json()).dump());
  const json &function = field("function");
  std::vector<int64_t> outParamBuffers;
  std::vector<std::string> loops;
  try {
    outParamBuffers = function.at("out_param_buffers").get<std::vector<int64_t>>();
    loops = function.at("threaded_loop_nests").get<std::vector<std::string>>();
  } catch (const json::exception &e) {
    fail("{}: '{}' field \"function\": {}", what, manifestPath, e.what());
  }
  return linkCompiledStep(hloStep, objectPath, std::move(outParamBuffers), loops, what, grid);
}

} // namespace kiln
