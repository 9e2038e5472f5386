//===- CheckHloCommand.cpp - kiln check-hlo -------------------------------===//
//
// kiln check-hlo DIR --config run.json [--model ...] [--tolerance T]
//                [--save-io IO_DIR] [--backend evaluator|compiled]
//                [--section.key=value ...]
// kiln check-hlo --neuron DIR
// DIR holds what `kiln compile` wrote for the same run; the run needs
// data.tokens_file (the batch evaluated). Exit status 1 on a mismatch, or
// with --neuron (the conformance rules alone, no run) on a broken rule.

#include "Commands.h"
#include "kiln/Driver/NeuronCheck.h"
#include "kiln/Support/Error.h"

#include <cmath>
#include <optional>

namespace kiln {

int runCheckHlo(const std::vector<std::string> &args) {
  std::optional<std::string> dir, configPath, model, tolerance, saveIo, backend;
  std::vector<std::string> overrides;
  bool neuronRules = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string &a = args[i];
    if (a == "--neuron") {
      neuronRules = true;
      continue;
    }
    std::optional<std::string> *slot = a == "--config"      ? &configPath
                                       : a == "--model"     ? &model
                                       : a == "--tolerance" ? &tolerance
                                       : a == "--save-io"   ? &saveIo
                                       : a == "--backend"   ? &backend
                                                            : nullptr;
    if (slot) {
      if (i + 1 >= args.size())
        fail("check-hlo: option '{}' needs a value", a);
      *slot = args[++i];
    } else if (a.rfind("--", 0) == 0 && a.find('.') != std::string::npos) {
      overrides.push_back(a);
    } else if (a.rfind("-", 0) != 0 && !dir) {
      dir = a;
    } else {
      fail("check-hlo: unexpected argument '{}'", a);
    }
  }
  if (!dir)
    fail("check-hlo: the directory kiln compile wrote is required");
  if (neuronRules) {
    if (configPath || model || tolerance || saveIo || backend || !overrides.empty())
      fail("check-hlo: --neuron checks DIR alone; it takes no run options");
    return checkNeuronConformance(*dir) ? 0 : 1;
  }
  if (model) {
    overrides.push_back("--model.flavor=\"\"");
    overrides.push_back("--model.hf_path=" + *model);
  }
  double tol = 1e-5;
  if (tolerance) {
    try {
      tol = std::stod(*tolerance);
    } catch (...) {
      fail("check-hlo: --tolerance needs a number, got '{}'", *tolerance);
    }
    if (!std::isfinite(tol) || tol < 0)
      fail("check-hlo: --tolerance must be a finite number >= 0, got '{}'", *tolerance);
  }
  HloBackend runner = HloBackend::Evaluator;
  if (backend && *backend == "compiled")
    runner = HloBackend::Compiled;
  else if (backend && *backend != "evaluator")
    fail("check-hlo: --backend is 'evaluator' (the reference evaluator) or 'compiled' (the "
         "module compiled for the CPU), not '{}'",
         *backend);
  if (isPipelinedArtifacts(*dir)) {
    if (runner != HloBackend::Evaluator)
      fail("check-hlo: --backend compiled runs one module; {} holds a pipelined run's modules, "
           "which the evaluator checks",
           *dir);
    if (saveIo)
      fail("check-hlo: --save-io writes one module's arguments and results; {} holds a "
           "pipelined run's modules, which it does not write yet",
           *dir);
    return checkPipelinedNeuronArtifacts(TrainConfig::load(configPath.value_or(""), overrides),
                                         *dir, tol)
               ? 0
               : 1;
  }
  return checkNeuronArtifacts(TrainConfig::load(configPath.value_or(""), overrides), *dir, tol,
                              saveIo.value_or(""), runner)
             ? 0
             : 1;
}

} // namespace kiln
