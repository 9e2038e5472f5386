//===- PlanCommand.cpp - kiln plan ----------------------------------------===//

#include "Commands.h"
#include "kiln/Driver/LayoutSearch.h"
#include "kiln/Driver/PlanFit.h"
#include "kiln/Driver/PlanValidation.h"
#include "kiln/Driver/Planning.h"
#include "kiln/Support/CommandLine.h"
#include "kiln/Support/Error.h"
#include "kiln/Support/ProgressLine.h"

#include "mlir/Support/Timing.h"
#include "kiln/Support/Json.h"

#include <fmt/core.h>

#include <chrono>
#include <cstdio>
#include <limits>

namespace kiln {
namespace {

/// What --validate and --fit read: the published runs as their file says
/// (built in, or --published FILE), with no run options of the command's.
PublishedRuns publishedRuns(const std::optional<std::string> &file,
                            const std::vector<std::string> &overrides, const char *mode) {
  if (!overrides.empty())
    fail("plan: {} plans the published runs as their file says; it takes no "
         "--section.key=value (got '{}')",
         mode, overrides.front());
  std::string source = file.value_or("targets/published/runs.json (built in)");
  return parsePublishedRuns(file ? readFile(*file) : builtinPublishedRuns(), source);
}

} // namespace

int runPlan(const std::vector<std::string> &allArgs) {
  // `--section.key=value` words configure the run as `kiln train` takes them
  // (--target.* is the kernel target's section); the rest are plan's own.
  std::vector<std::string> args, overrides;
  splitConfigOverrides(allArgs, args, overrides);
  OptionList options("plan", args, {"json", "search", "search-whole-model", "timing", "validate"});
  bool json = options.flag("json");
  if (std::optional<std::string> fitTarget = options.value("fit")) {
    // One target's factors fitted to the published runs planned on it.
    std::optional<std::string> published = options.value("published");
    std::string factors = options.required("fit-factors");
    std::optional<std::string> output = options.value("o");
    options.finish();
    ProfileFit fit = fitProfile(publishedRuns(published, overrides, "--fit"), *fitTarget,
                                      parseFitParameters(factors));
    if (output)
      writeFileAtomic(*output, fittedProfileJson(fit));
    fmt::print("{}", json ? fitToJson(fit).dump(2) + "\n" : formatFit(fit));
    if (output && !json)
      fmt::print("wrote {}: {} with the fitted factors (kiln plan --target {})\n", *output,
                 fit.targetSource, *output);
    return 0;
  }
  if (options.flag("validate")) {
    // Published runs carry their own targets and configs.
    std::optional<std::string> published = options.value("published");
    options.finish();
    PublishedRuns runs = publishedRuns(published, overrides, "--validate");
    PlanValidation validation = validatePlanner(runs);
    fmt::print("{}", json ? validationToJson(validation).dump(2) + "\n"
                          : formatValidation(validation));
    if (!validation.withinTolerances()) {
      std::fflush(stdout);
      fmt::print(stderr, "error: plan --validate: a published run's figure is outside its "
                         "tolerance in {}\n",
                 runs.source);
      return 1;
    }
    return 0;
  }
  std::optional<std::string> configPath = options.value("config");
  std::optional<std::string> model = options.value("model");
  std::string targetName = options.required("target");
  constexpr int64_t kUnset = std::numeric_limits<int64_t>::min();
  int64_t nodes = options.integer("nodes", kUnset);
  std::optional<std::string> trace = options.value("trace");
  bool search = options.flag("search");
  std::optional<std::string> searchBy = options.value("search-by");
  int64_t top = options.integer("search-top", kUnset);
  int64_t maxBatch = options.integer("search-max-local-batch", kUnset);
  int64_t maxPipeline = options.integer("search-max-pp", kUnset);
  int64_t maxContext = options.integer("search-max-cp", kUnset);
  std::optional<std::string> searchAc = options.value("search-ac");
  bool timing = options.flag("timing");
  bool wholeModel = options.flag("search-whole-model");
  options.finish();
  if (!search && (searchBy || top != kUnset || maxBatch != kUnset || maxPipeline != kUnset ||
                  maxContext != kUnset || searchAc || wholeModel))
    fail("plan: --search-by, --search-top, --search-max-local-batch, --search-max-pp, "
         "--search-max-cp, --search-ac and --search-whole-model apply to --search");
  if (maxPipeline != kUnset && maxPipeline < 2)
    fail("plan: --search-max-pp must be at least 2, got {}", maxPipeline);
  if (maxContext != kUnset && maxContext < 2)
    fail("plan: --search-max-cp must be at least 2, got {}", maxContext);
  if (search && trace)
    fail("plan: --trace writes one plan's timeline; it does not apply to --search");
  if (top == kUnset)
    top = 5;
  else if (top < 1)
    fail("plan: --search-top must be at least 1, got {}", top);
  if (nodes == kUnset)
    nodes = 1;
  else if (nodes < 1)
    fail("plan: --nodes must be at least 1, got {}", nodes);
  if (model) { // the model named here replaces the run config's
    overrides.push_back("--model.hf_path=\"\"");
    overrides.push_back("--model.flavor=" + *model);
  }

  // --timing: where planning spends its time (the capture, each pass, the
  // memory plan, the schedule), summed over every layout a search plans,
  // reported on stderr when the command ends.
  mlir::DefaultTimingManager timingManager;
  timingManager.setEnabled(timing);
  // A list sums the timers of one name: each layout runs its own pipeline.
  timingManager.setDisplayMode(mlir::DefaultTimingManager::DisplayMode::List);
  mlir::TimingScope root = timingManager.getRootScope();
  mlir::TimingScope *timingScope = timing ? &root : nullptr;
  // The report prints as the manager goes, after what the command printed
  // (only then: kiln's main reports a failed write of standard output).
  struct FlushStdoutFirst {
    bool timing;
    ~FlushStdoutFirst() {
      if (timing)
        std::fflush(stdout);
    }
  } flushStdoutFirst{timing};

  auto start = std::chrono::steady_clock::now();
  TrainConfig config = TrainConfig::load(configPath.value_or(""), overrides);
  TargetProfile target = loadTargetProfile(targetName, thisMachine());
  if (search) {
    SearchOptions searchOptions;
    searchOptions.objective = parseSearchObjective(searchBy.value_or("tokens_per_second"));
    if (maxBatch != kUnset)
      searchOptions.maxLocalBatchSize = maxBatch;
    if (maxPipeline != kUnset)
      searchOptions.maxPipelineParallel = maxPipeline;
    if (maxContext != kUnset)
      searchOptions.maxContextParallel = maxContext;
    if (searchAc)
      searchOptions.checkpointing = parseSearchCheckpointing(*searchAc);
    // Its state on stderr: on a terminal in place, else a line every 10 s.
    ProgressLine progress = ProgressLine::onStderr();
    searchOptions.timing = timingScope;
    searchOptions.scaleFromLayers = !wholeModel;
    searchOptions.onProgress = [&](const SearchProgress &p) {
      progress.update(describeSearchProgress(p, searchOptions.objective));
    };
    LayoutSearch result = searchLayouts(config, target, nodes, searchOptions);
    progress.finish();
    if (json)
      fmt::print("{}\n", searchToJson(result, top).dump(2));
    else
      fmt::print("{}", formatSearch(result, top));
    return 0;
  }
  StepPlan plan = planTrainingRun(config, target, nodes, timingScope);
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
