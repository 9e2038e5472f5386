//===- ConfigDocument.cpp - A run config file, JSON or TOML --------------===//

#include "kiln/Config/ConfigDocument.h"
#include "kiln/Support/Error.h"
#include "kiln/Support/Json.h"

#include <toml++/toml.h>

#include <algorithm>
#include <cctype>

namespace kiln {

using json = nlohmann::json;

const std::vector<TorchtitanKey> &torchtitanKeysWithoutUse() {
  static const std::vector<TorchtitanKey> keys = {
      {"job.*", "where outputs go is each output's own key (checkpoint.folder, metrics.jsonl)",
       nullptr},
      {"profiling.*", "Kiln's profile of a step is kiln plan --trace, ahead of the run", nullptr},
      {"comm.*",
       "collectives are MPI's on CPU ranks and the Neuron runtime's on trn2, with their own "
       "timeouts",
       nullptr},
      {"fault_tolerance.*", "torchft's replica groups; a Kiln run resumes from its checkpoints",
       nullptr},
      {"memory_estimation.*", "kiln plan gives the memory per rank before the run", nullptr},
      {"validation.*", "validation is metrics.eval_freq on data.validation_fraction", nullptr},
      {"experimental.*", "torchtitan's extension points", nullptr},
      {"quantize.*", "float8 and MX training are not in Kiln", nullptr},
      {"model.name", "Kiln trains Qwen3; model.flavor says which (torchtitan's \"4B\" is qwen3-4b)",
       "qwen3"},
      {"model.hf_assets_path",
       "the tokenizer is data.tokenizer, initial weights checkpoint.initial_load_path", nullptr},
      {"training.data", "the dataset is Kiln's data section (data.source, data.path)", nullptr},
      {"training.dataset", "the dataset is Kiln's data section (data.source, data.path)", nullptr},
      {"training.dataset_path", "the dataset is Kiln's data section (data.source, data.path)",
       nullptr},
      {"metrics.enable_wandb", "Weights & Biases logging is not in Kiln", false},
      {"checkpoint.async_mode", "Kiln saves synchronously, to a temporary name then renamed",
       nullptr},
      {"checkpoint.export_dtype", "checkpoints keep the training dtype (float32 master weights)",
       nullptr},
      {"compile.components", "compiled mode compiles the whole step", nullptr},
  };
  return keys;
}

namespace {

const TorchtitanKey *withoutUse(const std::string &section, const std::string &key) {
  for (const TorchtitanKey &k : torchtitanKeysWithoutUse())
    if (k.name == section + ".*" || k.name == section + "." + key)
      return &k;
  return nullptr;
}

json fromToml(const toml::node &node, const std::string &path) {
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
  fail("{}:{}: a date or time is not a config value", path, node.source().begin.line);
}

/// torchtitan names Qwen3's flavors by size ("4B", "30B-A3B"); Kiln's are
/// "qwen3-4b", "qwen3-30b-a3b".
std::string kilnFlavor(const std::string &flavor) {
  std::string lower = flavor;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return char(std::tolower(c)); });
  return lower.rfind("qwen3-", 0) == 0 ? lower : "qwen3-" + lower;
}

} // namespace

ConfigDocument ConfigDocument::parseToml(const std::string &text, const std::string &path) {
  ConfigDocument doc;
  doc.path = path;
  toml::table root;
  try {
    root = toml::parse(text, path);
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
    bool anyIgnored = false;
    for (const auto &[key, value] : *keys) {
      std::string name(key.str());
      if (const TorchtitanKey *unused = withoutUse(section, name)) {
        json given = fromToml(value, path);
        if (!unused->only.is_null() && given != unused->only)
          fail("{}:{}: '{}.{}' = {}: {} (Kiln takes {} alone)", path, value.source().begin.line,
               section, name, given.dump(), unused->why, unused->only.dump());
        doc.ignored.push_back(section + "." + name);
        anyIgnored = true;
        continue;
      }
      out[name] = fromToml(value, path);
      // With model.name, the flavor is torchtitan's.
      if (section == "model" && name == "flavor" && out[name].is_string() && keys->contains("name"))
        out[name] = kilnFlavor(out[name].get<std::string>());
      doc.lines[section + "." + name] = int64_t(value.source().begin.line);
    }
    if (out.empty() && anyIgnored)
      doc.sections.erase(section); // a section of ignored keys alone
  }
  return doc;
}

namespace {

bool endsWith(const std::string &s, const std::string &suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

} // namespace

ConfigDocument ConfigDocument::read(const std::string &path) {
  if (endsWith(path, ".toml"))
    return parseToml(readFile(path), path);
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
