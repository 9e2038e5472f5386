//===- CommandLine.h - Subcommand option parsing ----------------*- C++ -*-===//
//
// Options of one subcommand: `--name value`, `--name=value`, `-o value` and
// value-less flags. Each option is taken once by the subcommand; whatever is
// left over is an error naming the unknown option.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_SUPPORT_COMMANDLINE_H
#define KILN_SUPPORT_COMMANDLINE_H

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace kiln {

class OptionList {
public:
  /// `args` are the words after the subcommand; `flags` name the options
  /// that take no value (without dashes).
  OptionList(std::string command, const std::vector<std::string> &args,
             const std::set<std::string> &flags);

  bool flag(const std::string &name);
  std::optional<std::string> value(const std::string &name);
  std::string required(const std::string &name);
  int64_t integer(const std::string &name, int64_t defaultValue);
  /// Throws kiln::Error if any option was not taken.
  void finish() const;

private:
  std::string command_;
  std::vector<std::pair<std::string, std::optional<std::string>>> options_;
};

/// Splits a subcommand's words into its own options (`args`) and the run
/// config's `--section.key=value` overrides, as `kiln train` takes them.
void splitConfigOverrides(const std::vector<std::string> &words, std::vector<std::string> &args,
                          std::vector<std::string> &overrides);

/// torchtitan's spelling of the run config's file, `--job.config_file F`
/// (or `=F`), rewritten to Kiln's `--config F`.
void acceptTorchtitanConfigFile(std::vector<std::string> &words);

} // namespace kiln

#endif // KILN_SUPPORT_COMMANDLINE_H
