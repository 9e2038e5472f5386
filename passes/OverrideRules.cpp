//===- OverrideRules.cpp - Kernel substitution rules -----------------------===//

#include "kiln/OverrideRules.h"
#include "kiln/Dialect/Kiln/IR/KernelSpec.h"
#include "kiln/Support/Error.h"
#include "kiln/Support/Glob.h"
#include "kiln/Support/Json.h"

#include <fmt/core.h>

#include <set>

namespace kiln {

namespace {

std::string describe(const OverrideRule &rule, size_t index) {
  return rule.name.empty() ? fmt::format("rule #{}", index) : fmt::format("rule '{}'", rule.name);
}

OverrideRule parseRule(const nlohmann::json &value, size_t index, const std::string &source) {
  OverrideRule rule;
  rule.source = source;
  if (!value.is_object())
    fail("{}: rule #{} must be an object, got {}", source, index, briefJson(value));
  auto text = [&](const char *key, std::string &into, bool required) {
    auto it = value.find(key);
    if (it == value.end()) {
      if (required)
        fail("{}: {}: missing '{}'", source, describe(rule, index), key);
      return;
    }
    if (!it->is_string() || it->get<std::string>().empty())
      fail("{}: {}: '{}' must be a non-empty string, got {}", source, describe(rule, index), key,
           briefJson(*it));
    into = it->get<std::string>();
  };
  text("name", rule.name, true);
  text("target", rule.target, true);
  text("kernel", rule.kernel, true);
  for (const auto &[key, field] : value.items()) {
    if (key == "name" || key == "target" || key == "kernel")
      continue;
    if (key == "exact") {
      if (!field.is_boolean())
        fail("{}: {}: 'exact' must be true or false, got {}", source, describe(rule, index),
             briefJson(field));
      rule.exact = field.get<bool>();
    } else if (key == "fqns") {
      if (!field.is_array())
        fail("{}: {}: 'fqns' must be a list of glob strings, got {}", source,
             describe(rule, index), briefJson(field));
      for (const auto &glob : field) {
        if (!glob.is_string())
          fail("{}: {}: every entry of 'fqns' must be a string, got {}", source,
               describe(rule, index), briefJson(glob));
        rule.fqns.push_back(glob.get<std::string>());
      }
    } else if (key == "options") {
      if (!field.is_object())
        fail("{}: {}: 'options' must be an object, got {}", source, describe(rule, index),
             briefJson(field));
      rule.options = field;
    } else if (key == "description") {
      if (!field.is_string())
        fail("{}: {}: 'description' must be a string, got {}", source, describe(rule, index),
             briefJson(field));
      rule.description = field.get<std::string>();
    } else {
      fail("{}: {}: unknown key '{}' (known: name, target, exact, fqns, kernel, options, "
           "description)",
           source, describe(rule, index), key);
    }
  }
  return rule;
}

} // namespace

std::vector<OverrideRule> parseOverrideRules(const nlohmann::json &rules,
                                             const std::string &source) {
  if (!rules.is_array())
    fail("{}: the override rules must be a list of rule objects, got {}", source,
         briefJson(rules));
  std::vector<OverrideRule> parsed;
  for (size_t i = 0; i < rules.size(); ++i)
    parsed.push_back(parseRule(rules[i], i, source));
  return parsed;
}

std::vector<OverrideRule> loadOverrideRuleFile(const std::string &path) {
  nlohmann::json json = parseJson(readFile(path), path);
  if (json.is_object()) {
    if (json.size() != 1 || !json.contains("rules"))
      fail("{}: a rule file is a list of rules or an object {{\"rules\": [...]}}", path);
    json = json["rules"];
  }
  return parseOverrideRules(json, path);
}

std::string checkOverrideRules(const std::vector<OverrideRule> &rules) {
  std::set<std::string> names;
  for (const OverrideRule &rule : rules) {
    std::string where = fmt::format("{}: rule '{}'", rule.source, rule.name);
    if (!names.insert(rule.name).second)
      return fmt::format("{}: a second rule named '{}' (rule names must be unique)", where,
                         rule.name);
    const KernelSpec *spec = lookupKernelSpec(rule.kernel);
    if (!spec) {
      std::string known;
      for (const KernelSpec *s : registeredKernelSpecs())
        known += (known.empty() ? "" : ", ") + s->name().str();
      return fmt::format("{}: unknown kernel '{}' (registered: {})", where, rule.kernel, known);
    }
    if (spec->targetOp() != rule.target)
      return fmt::format("{}: kernel '{}' implements '{}', not the target '{}'", where,
                         rule.kernel, spec->targetOp().str(), rule.target);
    for (const std::string &glob : rule.fqns)
      if (std::string error = globError(glob); !error.empty())
        return fmt::format("{}: bad glob '{}' in fqns: {}", where, glob, error);
  }
  return "";
}

} // namespace kiln
