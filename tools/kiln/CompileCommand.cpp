//===- CompileCommand.cpp - kiln compile ----------------------------------===//
//
// kiln compile --config run.json [--model <dir|flavor>] [--target trn2|trn1|cpu] -o DIR
//              [--allow-oversize] [--section.key=value ...]
// The run's options parse as `kiln train` parses them (TrainConfig); --target
// sets target.name (cpu: the step as native code for this CPU, CpuCompile.h)
// and --model the model section.

#include "Commands.h"
#include "kiln/Driver/CpuCompile.h"
#include "kiln/Driver/NeuronCompile.h"
#include "kiln/Support/Error.h"

#include <optional>

namespace kiln {

int runCompile(const std::vector<std::string> &args) {
  std::optional<std::string> configPath, outDir, target, model;
  std::vector<std::string> overrides;
  bool allowOversize = false;
  auto take = [&](size_t &i, const std::string &name, std::optional<std::string> &slot) {
    const std::string &a = args[i];
    bool spaced = a == name;
    if (!spaced && a.rfind(name + "=", 0) != 0)
      return false;
    if (slot)
      fail("compile: option '{}' is given twice", name);
    if (spaced && i + 1 >= args.size())
      fail("compile: option '{}' needs a value", name);
    slot = spaced ? args[++i] : a.substr(name.size() + 1);
    if (slot->empty())
      fail("compile: option '{}' needs a value", name);
    return true;
  };
  for (size_t i = 0; i < args.size(); ++i) {
    if (take(i, "--config", configPath) || take(i, "-o", outDir) ||
        take(i, "--target", target) || take(i, "--model", model))
      continue;
    if (args[i] == "--allow-oversize") {
      allowOversize = true;
      continue;
    }
    if (args[i].rfind("--", 0) != 0 || args[i].find('.') == std::string::npos)
      fail("compile: unknown option '{}' (expected --config, --model, --target, -o, "
           "--allow-oversize or --section.key=value)",
           args[i]);
    overrides.push_back(args[i]);
  }
  if (!outDir)
    fail("compile: -o DIR is required (the directory the artifacts go to)");
  if (target)
    overrides.push_back("--target.name=" + *target);
  if (model) {
    overrides.push_back("--model.hf_path=\"\"");
    overrides.push_back("--model.flavor=" + *model);
  }
  TrainConfig config = TrainConfig::load(configPath.value_or(""), overrides);
  if (config.target.name == TargetName::Cpu) {
    if (allowOversize)
      fail("compile: --allow-oversize applies to the Neuron targets (trn2, trn1), whose rank "
           "memory the plan checks; --target cpu compiles for this machine");
    compileForCpu(config, *outDir);
  } else {
    compileForNeuron(config, *outDir, allowOversize);
  }
  return 0;
}

} // namespace kiln
