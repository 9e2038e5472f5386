//===- Commands.h - kiln driver subcommands ---------------------*- C++ -*-===//
#ifndef KILN_TOOLS_KILN_COMMANDS_H
#define KILN_TOOLS_KILN_COMMANDS_H

#include <optional>
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
/// kiln help [<command> | keys [--markdown]] (Help.cpp).
int runHelp(const std::vector<std::string> &args);
/// The driver's usage: every command's.
std::string usage();
/// One command's usage and, for a command that reads a run config, every
/// config key; nullopt for an unknown command.
std::optional<std::string> commandHelp(const std::string &command);
} // namespace kiln

#endif // KILN_TOOLS_KILN_COMMANDS_H
