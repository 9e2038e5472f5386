//===- OverrideRules.cpp - Kernel substitution rules -----------------------===//

#include "kiln/Config/OverrideRules.h"
#include "kiln/Support/Error.h"
#include "kiln/Support/Json.h"

#include <fmt/core.h>

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

} // namespace kiln
