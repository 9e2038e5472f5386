//===- ConfigHelp.cpp - The run configuration's keys, described ----------===//

#include "kiln/Driver/ConfigHelp.h"
#include "kiln/Config/ConfigDocument.h"
#include "kiln/Driver/TrainConfig.h"

#include <fmt/core.h>

namespace kiln {

namespace {

/// A default as JSON writes it; "" for an unset string reads `""`.
std::string shown(const nlohmann::json &value) { return value.dump(); }

/// "integer, > 0", "string, one of ...".
std::string typeAndAllowed(const ConfigKey &k) {
  return k.allowed.empty() ? k.type : k.type + ", " + k.allowed;
}

/// config.json fields are keys of `model` too, checked against the model.
std::string modelFields(const char *quote) {
  std::string names;
  for (const std::string &name : Qwen3Config::hfFieldNames())
    names += (names.empty() ? "" : ", ") + (quote + name + quote);
  return "model also takes any config.json field by its Hugging Face name "
         "(model.num_experts=64), checked against the model: " + names;
}

} // namespace

std::string configKeysText() {
  std::string out = "config keys: sections of the --config file, or --section.key=value on the "
                    "command line (later wins)\n";
  std::string section;
  for (const ConfigKey &k : TrainConfig::schema()) {
    if (k.section != section) {
      section = k.section;
      out += fmt::format("\n  {}\n", section);
    }
    out += fmt::format("    {} = {}  ({})\n        {}\n", k.key, shown(k.defaultValue),
                       typeAndAllowed(k), k.description);
  }
  out += "\n" + modelFields("") + "\n";
  out += "\n--config takes JSON or torchtitan's TOML (a .toml file); torchtitan keys without a "
         "use in Kiln are ignored with a warning:\n";
  for (const TorchtitanKey &k : torchtitanKeysWithoutUse())
    out += fmt::format("    {}{}: {}\n", k.name,
                       k.only.is_null() ? "" : " (only " + k.only.dump() + ")", k.why);
  return out;
}

std::string configKeysMarkdown() {
  std::string out = "| key | default | type | description |\n|---|---|---|---|\n";
  for (const ConfigKey &k : TrainConfig::schema())
    out += fmt::format("| `{}.{}` | `{}` | {} | {} |\n", k.section, k.key, shown(k.defaultValue),
                       typeAndAllowed(k), k.description);
  out += "\n" + modelFields("`") + ".\n";
  out += "\nIn a TOML file, torchtitan keys without a use in Kiln are ignored with one warning "
         "line (one that may only be off is an error otherwise):\n\n"
         "| torchtitan key | value | why Kiln has no use for it |\n|---|---|---|\n";
  for (const TorchtitanKey &k : torchtitanKeysWithoutUse())
    out += fmt::format("| `{}` | {} | {} |\n", k.name,
                       k.only.is_null() ? "any" : "`" + k.only.dump() + "`", k.why);
  return out;
}

} // namespace kiln
