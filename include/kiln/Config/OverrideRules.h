//===- OverrideRules.h - Kernel substitution rules ---------------*- C++ -*-===//
//
// torchtitan's override registry as data: each rule names a kiln op
// (`target`), the module paths it applies to (`fqns`, fnmatch globs; none:
// every instance) and the registered kernel to put there. Rules come from
// the run config (`override.rules`) and rule files (`override.files`);
// kiln-substitute-kernels applies them.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_OVERRIDERULES_H
#define KILN_OVERRIDERULES_H

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace kiln {

struct OverrideRule {
  std::string name;
  std::string target; ///< a kiln op, e.g. "kiln.rope"
  std::string kernel; ///< a registered kernel, e.g. "nki_rope"
  /// true: every selected node must be a form the kernel implements (else an
  /// error); false: nodes of other forms are left alone, each with a note.
  bool exact = false;
  std::vector<std::string> fqns; ///< fnmatch globs; empty: every instance
  nlohmann::json options = nlohmann::json::object();
  std::string description;
  std::string source; ///< where it was given, for messages
};

/// Parses a JSON array of rule objects; `source` names it in errors (e.g.
/// "run config override.rules" or a file name). Throws kiln::Error naming
/// the rule (by index or name) and the field for unknown keys, wrong types
/// and missing fields.
std::vector<OverrideRule> parseOverrideRules(const nlohmann::json &rules,
                                             const std::string &source);
/// A rule file: a JSON array of rules, or an object {"rules": [...]}.
std::vector<OverrideRule> loadOverrideRuleFile(const std::string &path);

} // namespace kiln

#endif // KILN_OVERRIDERULES_H
