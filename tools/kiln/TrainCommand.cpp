//===- TrainCommand.cpp - kiln train --------------------------------------===//

#include "Commands.h"
#include "kiln/Driver/TrainingJob.h"

namespace kiln {

int runTrain(const std::vector<std::string> &args) {
  std::string configPath;
  std::vector<std::string> overrides;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--config" && i + 1 < args.size())
      configPath = args[++i];
    else if (args[i].rfind("--config=", 0) == 0)
      configPath = args[i].substr(9);
    else
      overrides.push_back(args[i]);
  }
  return runTrainingJob(TrainConfig::load(configPath, overrides));
}

} // namespace kiln
