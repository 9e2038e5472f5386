//===- PlanCommand.cpp - kiln plan ----------------------------------------===//

#include "Commands.h"
#include "kiln/Driver/Planning.h"
#include "kiln/Support/CommandLine.h"
#include "kiln/Support/Error.h"

#include <fmt/core.h>

#include <chrono>
#include <limits>

namespace kiln {

int runPlan(const std::vector<std::string> &allArgs) {
  // `--section.key=value` words configure the run as `kiln train` takes them
  // (--target.* is the kernel target's section); the rest are plan's own.
  std::vector<std::string> args, overrides;
  for (const std::string &a : allArgs) {
    std::string name = a.substr(0, a.find('='));
    (a.rfind("--", 0) == 0 && name.find('.') != std::string::npos ? overrides : args)
        .push_back(a);
  }
  OptionList options("plan", args, {"json"});
  std::optional<std::string> configPath = options.value("config");
  std::optional<std::string> model = options.value("model");
  std::string targetName = options.required("target");
  constexpr int64_t kUnset = std::numeric_limits<int64_t>::min();
  int64_t nodes = options.integer("nodes", kUnset);
  bool json = options.flag("json");
  std::optional<std::string> trace = options.value("trace");
  options.finish();
  if (nodes == kUnset)
    nodes = 1;
  else if (nodes < 1)
    fail("plan: --nodes must be at least 1, got {}", nodes);
  if (model) { // the model named here replaces the run config's
    overrides.push_back("--model.hf_path=\"\"");
    overrides.push_back("--model.flavor=" + *model);
  }

  auto start = std::chrono::steady_clock::now();
  TrainConfig config = TrainConfig::load(configPath.value_or(""), overrides);
  TargetProfile target = loadTargetProfile(targetName, thisMachine());
  StepPlan plan = planTrainingRun(config, target, nodes);
  std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
  if (trace)
    writeChromeTrace(plan, *trace);
  if (json) {
    nlohmann::json out = planToJson(plan);
    out["planning_seconds"] = elapsed.count();
    fmt::print("{}\n", out.dump(2));
  } else {
    fmt::print("{}", formatPlan(plan));
    fmt::print("planned in {:.2f} s{}\n", elapsed.count(),
               trace ? fmt::format("; trace written to {}", *trace) : "");
  }
  return 0;
}

} // namespace kiln
