//===- ConfigDocument.cpp - A run config file, JSON or TOML --------------===//

#include "kiln/Config/ConfigDocument.h"
#include "kiln/Support/Error.h"
#include "kiln/Support/Json.h"

#include <toml++/toml.h>

#include <sstream>

namespace kiln {

using json = nlohmann::json;

const std::vector<std::pair<std::string, std::string>> &torchtitanKeysWithoutUse() {
  static const std::vector<std::pair<std::string, std::string>> keys = {
      {"job.*", "where outputs go is each output's own key (checkpoint.folder, metrics.jsonl)"},
      {"profiling.*", "Kiln's profile of a step is kiln plan --trace, ahead of the run"},
      {"comm.*", "collectives are MPI's on CPU ranks and the Neuron runtime's on trn2, with "
                 "their own timeouts"},
      {"fault_tolerance.*", "torchft's replica groups; a Kiln run resumes from its checkpoints"},
      {"memory_estimation.*", "kiln plan gives the memory per rank before the run"},
      {"model.name", "Kiln trains Qwen3: model.flavor or model.hf_path says which"},
      {"checkpoint.async_mode", "Kiln saves synchronously, to a temporary name then renamed"},
      {"checkpoint.export_dtype", "checkpoints keep the training dtype (float32 master weights)"},
  };
  return keys;
}

namespace {

bool withoutUse(const std::string &section, const std::string &key) {
  for (const auto &[name, why] : torchtitanKeysWithoutUse())
    if (name == section + ".*" || name == section + "." + key)
      return true;
  return false;
}

json fromToml(const toml::node &node, const std::string &path) {
  auto line = [&] { return int64_t(node.source().begin.line); };
  if (const toml::table *table = node.as_table()) {
    json out = json::object();
    for (const auto &[key, value] : *table)
      out[std::string(key.str())] = fromToml(value, path);
    return out;
  }
  if (const toml::array *array = node.as_array()) {
    json out = json::array();
    for (const toml::node &value : *array)
      out.push_back(fromToml(value, path));
    return out;
  }
  if (auto s = node.value_exact<std::string>())
    return *s;
  if (auto i = node.value_exact<int64_t>())
    return *i;
  if (auto d = node.value_exact<double>())
    return *d;
  if (auto b = node.value_exact<bool>())
    return *b;
  fail("{}:{}: a date or time is not a config value", path, line());
}

ConfigDocument readToml(const std::string &path) {
  ConfigDocument doc;
  doc.path = path;
  toml::table root;
  try {
    root = toml::parse(readFile(path), path);
  } catch (const toml::parse_error &e) {
    fail("{}:{}:{}: not TOML: {}", path, e.source().begin.line, e.source().begin.column,
         std::string(e.description()));
  }
  for (const auto &[sectionKey, body] : root) {
    std::string section(sectionKey.str());
    const toml::table *keys = body.as_table();
    if (!keys) {
      doc.sections[section] = fromToml(body, path);
      doc.lines[section] = int64_t(body.source().begin.line);
      continue;
    }
    json &out = doc.sections[section] = json::object();
    for (const auto &[key, value] : *keys) {
      std::string name(key.str());
      if (withoutUse(section, name)) {
        doc.ignored.push_back(section + "." + name);
        continue;
      }
      out[name] = fromToml(value, path);
      doc.lines[section + "." + name] = int64_t(value.source().begin.line);
    }
    if (out.empty() && std::any_of(doc.ignored.begin(), doc.ignored.end(), [&](const auto &k) {
          return k.rfind(section + ".", 0) == 0;
        }))
      doc.sections.erase(section); // a section of ignored keys alone
  }
  return doc;
}

bool endsWith(const std::string &s, const std::string &suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

} // namespace

ConfigDocument ConfigDocument::read(const std::string &path) {
  if (endsWith(path, ".toml"))
    return readToml(path);
  ConfigDocument doc;
  doc.path = path;
  doc.sections = JsonObject::parse(readFile(path), path).json();
  return doc;
}

std::string ConfigDocument::where(const std::string &section, const std::string &key) const {
  auto it = lines.find(key.empty() ? section : section + "." + key);
  return it == lines.end() ? path : path + ":" + std::to_string(it->second);
}

} // namespace kiln
