//===- CalibrateCpuCommand.cpp - kiln calibrate-cpu -----------------------===//

#include "Commands.h"
#include "kiln/Backend/CPU/DeviceGrid.h"
#include "kiln/Driver/CpuCalibration.h"
#include "kiln/Support/CommandLine.h"

#include <fmt/core.h>

namespace kiln {

int runCalibrateCpu(const std::vector<std::string> &allArgs) {
  // `--section.key=value` words configure the run as `kiln train` takes them.
  std::vector<std::string> args, overrides;
  splitConfigOverrides(allArgs, args, overrides);
  OptionList options("calibrate-cpu", args, {});
  std::optional<std::string> configPath = options.value("config");
  int64_t steps = options.integer("steps", 6);
  options.finish();
  CpuCalibration calibration =
      calibrateCpu(TrainConfig::load(configPath.value_or(""), overrides), steps);
  if (MpiWorld::get().rank() == 0)
    fmt::print("{}", formatCpuCalibration(calibration));
  return 0;
}

} // namespace kiln
