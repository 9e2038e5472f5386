//===- Commands.h - kiln driver subcommands ---------------------*- C++ -*-===//
#ifndef KILN_TOOLS_KILN_COMMANDS_H
#define KILN_TOOLS_KILN_COMMANDS_H

#include <string>
#include <vector>

namespace kiln {
/// Each returns the process exit code; errors are thrown as kiln::Error.
int runCapture(const std::vector<std::string> &args);
int runEval(const std::vector<std::string> &args);
int runTrain(const std::vector<std::string> &args);
int runCheckpoint(const std::vector<std::string> &args);
int runTokenize(const std::vector<std::string> &args);
int runCheckKernel(const std::vector<std::string> &args);
int runPlan(const std::vector<std::string> &args);
int runCalibrateCpu(const std::vector<std::string> &args);
int runCompile(const std::vector<std::string> &args);
int runCheckHlo(const std::vector<std::string> &args);
} // namespace kiln

#endif // KILN_TOOLS_KILN_COMMANDS_H
