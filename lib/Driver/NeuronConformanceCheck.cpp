//===- NeuronConformanceCheck.cpp - kiln check-hlo --neuron DIR -----------===//

#include "kiln/Backend/Neuron/NeuronConformance.h"
#include "kiln/Driver/NeuronCheck.h"
#include "kiln/Driver/NeuronManifest.h"
#include "kiln/Support/Error.h"
#include "kiln/Support/Json.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <optional>

using json = nlohmann::json;

namespace kiln {
namespace {

/// The manifest's NEFF names of `entries` (parameters or outputs) against
/// the module's `names`.
void compareNames(const json &entries, const std::vector<std::string> &names, const char *what,
                  std::vector<neuron::ConformanceViolation> &out) {
  if (!entries.is_array() || entries.size() != names.size()) {
    out.push_back({"manifest-names", fmt::format("the manifest lists {} {}s, the module has {}",
                                                 entries.is_array() ? entries.size() : 0, what,
                                                 names.size())});
    return;
  }
  for (size_t i = 0; i < names.size(); ++i) {
    std::string listed = entries[i].is_object() ? entries[i].value("neff_name", "") : "";
    if (listed != names[i])
      out.push_back({"manifest-names", fmt::format("{} {} is '{}' in the manifest but '{}' in "
                                                   "the module",
                                                   what, i, listed, names[i])});
  }
}

} // namespace

namespace {

/// The manifest of a pipelined run's folder, if DIR is one.
std::optional<json> pipelinedManifest(const std::string &dir) {
  std::string path = dir + "/manifest.json";
  if (!std::filesystem::exists(path))
    return std::nullopt;
  json manifest = parseJson(readFile(path), path);
  if (!manifest.is_object() || !manifest.contains("pipeline"))
    return std::nullopt;
  if (!manifest.contains("modules") || !manifest["modules"].is_array())
    fail("check-hlo: {}: a pipelined run's manifest needs 'modules', the list of its module "
         "folders",
         path);
  return manifest;
}

} // namespace

bool isPipelinedArtifacts(const std::string &dir) { return pipelinedManifest(dir).has_value(); }

bool checkNeuronConformance(const std::string &dir) {
  if (std::optional<json> pipelined = pipelinedManifest(dir)) {
    bool ok = true;
    for (const json &name : (*pipelined)["modules"]) {
      if (!name.is_string())
        fail("check-hlo: {}/manifest.json: 'modules' lists a non-string", dir);
      ok &= checkNeuronConformance(dir + "/" + name.get<std::string>());
    }
    return ok;
  }
  std::string protoPath = dir + "/model.hlo.pb", manifestPath = dir + "/manifest.json";
  xla::HloModuleProto module;
  if (!module.ParseFromString(readFile(protoPath)))
    fail("check-hlo: {} is not a serialized xla.HloModuleProto", protoPath);
  json manifest = parseJson(readFile(manifestPath), manifestPath);
  int64_t world = manifestPositive(manifest, manifestPath, {"world_size"});
  int64_t communicators =
      manifestPositive(manifest, manifestPath, {"target", "neuron_max_communicators"});

  std::vector<neuron::ConformanceViolation> violations =
      neuron::checkConformance(module, world, communicators);
  compareNames(manifest.value("parameters", json()), neuron::neffInputNames(module), "parameter",
               violations);
  compareNames(manifest.value("outputs", json()), neuron::neffOutputNames(module), "output",
               violations);
  int64_t rankParams = 0;
  for (const json &p : manifest.value("parameters", json::array()))
    rankParams += p.is_object() && p.value("role", "") == "rank";
  if (rankParams != 1)
    violations.push_back({"manifest-names", fmt::format("the manifest has {} parameters of role "
                                                        "'rank', expected one",
                                                        rankParams)});

  fmt::print("Neuron conformance of {} ({} rank{}, up to {} communicators per NEFF):\n",
             protoPath, world, world > 1 ? "s" : "", communicators);
  std::vector<neuron::ConformanceRule> rules = neuron::conformanceRules();
  rules.push_back({"manifest-names", "manifest.json names every parameter and output as the "
                                     "module does, with one rank parameter"});
  int64_t broken = 0;
  for (const neuron::ConformanceRule &rule : rules) {
    bool ok = true;
    for (const neuron::ConformanceViolation &v : violations)
      if (v.rule == rule.name) {
        fmt::print("  FAIL {:<16} {}\n", rule.name, v.message);
        ok = false;
      }
    if (ok)
      fmt::print("  ok   {:<16} {}\n", rule.name, rule.summary);
    broken += !ok;
  }
  if (broken)
    fmt::print("{} of {} rules broken\n", broken, rules.size());
  else
    fmt::print("conforms: all {} rules hold\n", rules.size());
  return broken == 0;
}

} // namespace kiln
