//===- CaptureCommand.cpp - kiln capture ----------------------------------===//

#include "Commands.h"
#include "kiln/Dialect/Kiln/IR/KilnOps.h"
#include "kiln/Driver/Training.h"
#include "kiln/Frontend/Capture.h"
#include "kiln/Planner/ProgramCost.h"
#include "kiln/Support/CommandLine.h"
#include "kiln/Support/Json.h"

#include "mlir/IR/MLIRContext.h"

#include "llvm/Support/raw_ostream.h"

#include <fmt/core.h>

namespace kiln {

namespace {

void listFlavors() {
  fmt::print("{:<12} {:>7} {:>7} {:>6} {:>9} {:>13} {:>5} {:>16}\n", "flavor", "hidden",
             "layers", "heads", "kv_heads", "intermediate", "tied", "parameters");
  for (const Qwen3Config &c : Qwen3Config::flavors())
    fmt::print("{:<12} {:>7} {:>7} {:>6} {:>9} {:>13} {:>5} {:>16} ({:.3f}e9)\n", c.name,
               c.hiddenSize, c.numLayers, c.numHeads, c.numKvHeads, c.intermediateSize,
               c.tieWordEmbeddings ? "yes" : "no", c.parameterCount(),
               c.parameterCount() / 1e9);
}

std::string typeString(mlir::TypeRange types) {
  std::string out;
  for (mlir::Type type : types) {
    auto tensor = mlir::cast<mlir::RankedTensorType>(type);
    std::string dims;
    for (int64_t d : tensor.getShape())
      dims += (dims.empty() ? "" : "x") + std::to_string(d);
    out += (out.empty() ? "" : ", ") + ("[" + dims + "]");
  }
  return out;
}

void printSummary(mlir::ModuleOp module, const Qwen3Config &c) {
  fmt::print("model {}: {} layers, hidden {}, heads {}/{} (kv), head_dim {}, "
             "intermediate {}, vocab {}, {} embeddings\n",
             c.name, c.numLayers, c.hiddenSize, c.numHeads, c.numKvHeads, c.headDim,
             c.intermediateSize, c.vocabSize, c.tieWordEmbeddings ? "tied" : "untied");
  for (auto fn : module.getOps<mlir::func::FuncOp>()) {
    ProgramCost cost = programCost(fn);
    int64_t ops = 0;
    std::string counts;
    for (auto &[name, n] : cost.opCounts) {
      ops += n;
      counts += fmt::format("{}{} {}", counts.empty() ? "" : ", ", name, n);
    }
    fmt::print("@{}: ({}) -> ({})\n", fn.getName().str(),
               typeString(fn.getArgumentTypes().take_front(1)),
               typeString(fn.getResultTypes()));
    fmt::print("  parameters {} ({:.2f} MB), {} ops: {}\n", cost.parameterCount,
               cost.parameterBytes / 1e6, ops, counts);
    fmt::print("  {:.4g} GFLOP, {:.4g} MB read, {:.4g} MB written\n", cost.flops / 1e9,
               cost.bytesRead / 1e6, cost.bytesWritten / 1e6);
  }
}

} // namespace

int runCapture(const std::vector<std::string> &args) {
  OptionList options("capture", args, {"list-flavors", "summary", "train-step"});
  if (options.flag("list-flavors")) {
    options.finish();
    listFlavors();
    return 0;
  }
  Qwen3Config config = Qwen3Config::resolve(options.required("model"));
  CaptureOptions capture;
  capture.batch = options.integer("batch", 1);
  capture.seq = options.integer("seq", 0);
  std::optional<std::string> output = options.value("o");
  bool summary = options.flag("summary");
  bool trainStep = options.flag("train-step");
  std::optional<std::string> runConfig = options.value("config");
  options.finish();

  mlir::MLIRContext context;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  if (trainStep || runConfig) {
    // The optimizer's hyper-parameters come from a run config (torchtitan's
    // defaults without one); the model and shapes from the flags above.
    TrainConfig train = runConfig ? TrainConfig::load(*runConfig, {}) : TrainConfig();
    module = captureTrainingStep(context, config, capture,
                                 OptimizerSettings::fromConfig(train));
  } else {
    module = captureQwen3(context, config, capture);
  }
  if (output) {
    std::string text;
    llvm::raw_string_ostream os(text);
    module->print(os);
    writeFileAtomic(*output, text);
  }
  if (summary)
    printSummary(*module, config);
  else if (!output)
    module->print(llvm::outs());
  return 0;
}

} // namespace kiln
