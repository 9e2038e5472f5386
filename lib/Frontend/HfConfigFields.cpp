//===- HfConfigFields.cpp - config.json fields v4 and v5 write apart ------===//

#include "HfConfigFields.h"

#include "kiln/Support/Error.h"

#include <cmath>
#include <map>

namespace kiln {

namespace {
using nlohmann::json;

/// Numbers compare by value (1e6 and 1000000.0 state the same theta).
bool sameSetting(const json &a, const json &b) {
  if (a.is_number() && b.is_number())
    return a.get<double>() == b.get<double>();
  return a == b;
}

[[noreturn]] void failDisagreement(const std::string &source, const std::string &fieldA,
                                   const json &a, const std::string &fieldB, const json &b) {
  fail("{}: '{}' = {} and '{}' = {} disagree; state the setting once, or the same in both",
       source, fieldA, briefJson(a), fieldB, briefJson(b));
}

/// The RoPE settings config.json states, each with the field that states it,
/// gathered from the v4 and the v5 form.
class RopeFields {
public:
  explicit RopeFields(const std::string &source) : source_(source) {}

  void add(const std::string &key, const json &value, const std::string &field) {
    auto [it, inserted] = fields_.try_emplace(key, Stated{&value, field});
    if (!inserted && !sameSetting(*it->second.value, value))
      failDisagreement(source_, it->second.field, *it->second.value, field, value);
  }

  /// Every entry of `object`; `type` is read as `rope_type`, as Transformers
  /// does for old files.
  void addAll(const json &object, const std::string &prefix) {
    for (const auto &[key, value] : object.items())
      add(key == "type" ? "rope_type" : key, value, prefix + "." + key);
  }

  struct Stated {
    const json *value;
    std::string field;
  };
  const Stated *find(const std::string &key) const {
    auto it = fields_.find(key);
    return it == fields_.end() ? nullptr : &it->second;
  }

private:
  const std::string &source_;
  std::map<std::string, Stated> fields_;
};

/// `rope_parameters`, or its "full_attention" entry where v5 keeps one dict
/// per layer type (the only type Kiln builds; checkLayerTypes refuses the
/// rest, so a "sliding_attention" entry is never used).
std::pair<const json *, std::string> ropeParametersObject(const JsonObject &config) {
  const std::string &source = config.source();
  const json &p = config.get("rope_parameters");
  if (!p.is_object())
    fail("{}: 'rope_parameters' must be null or an object, got {}", source, briefJson(p));
  if (!p.contains("full_attention") && !p.contains("sliding_attention"))
    return {&p, "rope_parameters"};
  for (const auto &[key, value] : p.items())
    if (key != "full_attention" && key != "sliding_attention")
      fail("{}: 'rope_parameters' holds per-layer-type entries and '{}'; expected only "
           "'full_attention' and 'sliding_attention'",
           source, key);
  if (!p.contains("full_attention"))
    fail("{}: 'rope_parameters' has no 'full_attention' entry; Kiln's layers are all full "
         "attention",
         source);
  const json &full = p["full_attention"];
  if (!full.is_object())
    fail("{}: 'rope_parameters.full_attention' must be an object, got {}", source,
         briefJson(full));
  return {&full, "rope_parameters.full_attention"};
}

double positiveNumber(const std::string &source, const RopeFields::Stated &s) {
  const json &v = *s.value;
  if (!v.is_number() || !(v.get<double>() > 0) || !std::isfinite(v.get<double>()))
    fail("{}: '{}' must be a finite positive number, got {}", source, s.field, briefJson(v));
  return v.get<double>();
}

/// Llama 3's scaling fields, each required.
Llama3RopeScaling readLlama3Scaling(const std::string &source, const RopeFields &fields,
                                    const RopeFields::Stated &type) {
  std::string container = type.field.substr(0, type.field.rfind('.'));
  auto field = [&](const char *name) -> const RopeFields::Stated & {
    const RopeFields::Stated *s = fields.find(name);
    if (!s)
      fail("{}: '{}' lacks '{}', which rope_type \"llama3\" needs", source, container, name);
    return *s;
  };
  Llama3RopeScaling s;
  s.factor = positiveNumber(source, field("factor"));
  s.lowFreqFactor = positiveNumber(source, field("low_freq_factor"));
  const RopeFields::Stated &high = field("high_freq_factor");
  s.highFreqFactor = positiveNumber(source, high);
  const RopeFields::Stated &original = field("original_max_position_embeddings");
  if (!original.value->is_number_integer() || original.value->get<int64_t>() <= 0)
    fail("{}: '{}' must be a positive integer, got {}", source, original.field,
         briefJson(*original.value));
  s.originalMaxPositionEmbeddings = original.value->get<int64_t>();
  if (!(s.highFreqFactor > s.lowFreqFactor))
    fail("{}: '{}' ({}) must exceed 'low_freq_factor' ({})", source, high.field,
         s.highFreqFactor, s.lowFreqFactor);
  return s;
}
} // namespace

RopeParameters readRopeParameters(const JsonObject &config, bool llama) {
  const json &j = config.json();
  const std::string &source = config.source();
  RopeFields fields(source);
  if (j.contains("rope_theta"))
    fields.add("rope_theta", j["rope_theta"], "rope_theta");
  if (j.contains("rope_scaling") && !j["rope_scaling"].is_null()) {
    const json &scaling = j["rope_scaling"];
    if (!llama)
      fail("{}: 'rope_scaling' = {} is not supported: Kiln implements plain RoPE (null) for "
           "Qwen3",
           source, briefJson(scaling));
    if (!scaling.is_object())
      fail("{}: 'rope_scaling' must be null or an object, got {}", source, briefJson(scaling));
    fields.addAll(scaling, "rope_scaling");
  }
  if (j.contains("rope_parameters") && !j["rope_parameters"].is_null()) {
    auto [object, prefix] = ropeParametersObject(config);
    fields.addAll(*object, prefix);
  }

  const RopeFields::Stated *theta = fields.find("rope_theta");
  if (!theta)
    fail("{}: missing field 'rope_theta' (Transformers v4) or 'rope_parameters.rope_theta' "
         "(v5)",
         source);
  RopeParameters out;
  out.theta = positiveNumber(source, *theta);
  // A fraction of each head left unrotated changes the model.
  if (const RopeFields::Stated *partial = fields.find("partial_rotary_factor"))
    if (!sameSetting(*partial->value, 1.0))
      fail("{}: '{}' = {} is not supported: Kiln rotates the whole head (1.0)", source,
           partial->field, briefJson(*partial->value));

  const RopeFields::Stated *type = fields.find("rope_type");
  if (!type || *type->value == "default")
    return out;
  if (!llama)
    fail("{}: '{}' = {} is not supported: Kiln implements plain RoPE (\"default\") for Qwen3",
         source, type->field, briefJson(*type->value));
  if (*type->value != "llama3")
    fail("{}: '{}' = {} is not supported: Kiln implements \"llama3\" scaling (or "
         "\"default\")",
         source, type->field, briefJson(*type->value));
  out.scaling = readLlama3Scaling(source, fields, *type);
  return out;
}

void checkLayerTypes(const JsonObject &config, int64_t numLayers) {
  if (!config.has("layer_types") || config.get("layer_types").is_null())
    return;
  const std::string &source = config.source();
  const json &types = config.get("layer_types");
  if (!types.is_array())
    fail("{}: 'layer_types' must be an array with one attention type per layer, got {}",
         source, briefJson(types));
  if (int64_t(types.size()) != numLayers)
    fail("{}: 'layer_types' has {} entries but 'num_hidden_layers' is {}", source,
         types.size(), numLayers);
  for (size_t layer = 0; layer < types.size(); ++layer)
    if (types[layer] != "full_attention")
      fail("{}: 'layer_types[{}]' = {} is not supported: Kiln's attention is full causal "
           "attention (\"full_attention\")",
           source, layer, briefJson(types[layer]));
}

void checkDtypeFields(const JsonObject &config) {
  if (!config.has("torch_dtype") || !config.has("dtype"))
    return;
  const json &v4 = config.get("torch_dtype"), &v5 = config.get("dtype");
  if (!v4.is_null() && !v5.is_null() && v4 != v5)
    failDisagreement(config.source(), "torch_dtype", v4, "dtype", v5);
}

} // namespace kiln
