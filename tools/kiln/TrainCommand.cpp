//===- TrainCommand.cpp - kiln train --------------------------------------===//

#include "Commands.h"
#include "kiln/Driver/TrainingJob.h"
#include "kiln/Support/Error.h"

#include <optional>

namespace kiln {

int runTrain(const std::vector<std::string> &args) {
  std::optional<std::string> configPath;
  std::vector<std::string> overrides;
  for (size_t i = 0; i < args.size(); ++i) {
    bool isConfig = args[i] == "--config" || args[i].rfind("--config=", 0) == 0;
    if (!isConfig) {
      overrides.push_back(args[i]);
      continue;
    }
    if (configPath)
      fail("train: option '--config' is given twice ('{}' and '{}')", *configPath,
           args[i] == "--config" && i + 1 < args.size() ? args[i + 1] : args[i].substr(9));
    if (args[i] == "--config" && i + 1 >= args.size())
      fail("train: option '--config' needs a value (a run config JSON file)");
    configPath = args[i] == "--config" ? args[++i] : args[i].substr(9);
    if (configPath->empty())
      fail("train: option '--config' needs a value (a run config JSON file)");
  }
  return runTrainingJob(TrainConfig::load(configPath.value_or(""), overrides));
}

} // namespace kiln
