//===- TrainConfig.cpp - Run configuration for `kiln train` ---------------===//

#include "kiln/Driver/TrainConfig.h"
#include "kiln/Support/ClosedSets.h"
#include "kiln/Support/Error.h"
#include "kiln/Support/Json.h"
#include "kiln/Config/ConfigDocument.h"
#include "kiln/Config/OverrideRules.h"
#include "kiln/Config/SelectiveAcOption.h"

#include <fmt/core.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <functional>
#include <limits>
#include <type_traits>

namespace kiln {

using json = nlohmann::json;

namespace {

constexpr const char *kCommandLine = "command line";

/// A constraint beyond the JSON kind; `ok` only sees values of the right kind.
struct Rule {
  std::string what; // completes "'section.key' <what>, got <value>"
  std::function<bool(const json &)> ok;
};

/// One configuration key: where it lives, how to type-check, read and write it.
struct Field {
  std::string section, key;
  std::string description;                // one line, for --help and docs/cli.md
  std::string kindText;                   // "must be an integer", ...
  std::function<bool(const json &)> isKind;
  std::function<void(TrainConfig &, const json &)> set;
  std::function<json(const TrainConfig &)> get;
  std::optional<Rule> rule;
  bool isString;                          // overrides then keep raw text
};

/// E where T is a closed set E (ClosedSets.h) or an optional one, else void.
template <typename T> struct ClosedSetOf {
  using type = std::conditional_t<std::is_enum_v<T>, T, void>;
};
template <typename E> struct ClosedSetOf<std::optional<E>> {
  using type = std::conditional_t<std::is_enum_v<E>, E, void>;
};
template <typename T> constexpr bool isClosedSet = !std::is_void_v<typename ClosedSetOf<T>::type>;

/// E where T is a list of a closed set's words (std::vector<E>), else void.
template <typename T> struct ClosedSetListOf {
  using type = void;
};
template <typename E> struct ClosedSetListOf<std::vector<E>> {
  using type = std::conditional_t<std::is_enum_v<E>, E, void>;
};
template <typename T>
constexpr bool isClosedSetList = !std::is_void_v<typename ClosedSetListOf<T>::type>;

/// The JSON kind of a member type: its check and the phrase naming it.
template <typename T> std::pair<const char *, bool (*)(const json &)> kindOf() {
  if constexpr (std::is_same_v<T, std::string> || isClosedSet<T>)
    return {"must be a string", [](const json &v) { return v.is_string(); }};
  else if constexpr (std::is_same_v<T, int64_t>)
    return {"must be an integer", [](const json &v) { return isInt64(v); }};
  else if constexpr (std::is_same_v<T, double>)
    return {"must be a number", [](const json &v) { return v.is_number(); }};
  else if constexpr (std::is_same_v<T, std::optional<double>>)
    return {"must be a number or null",
            [](const json &v) { return v.is_number() || v.is_null(); }};
  else if constexpr (std::is_same_v<T, bool>)
    return {"must be true or false", [](const json &v) { return v.is_boolean(); }};
  else if constexpr (std::is_same_v<T, json>)
    return {"must be a list of override rules", [](const json &v) { return v.is_array(); }};
  else if constexpr (std::is_same_v<T, std::vector<std::string>> || isClosedSetList<T>)
    return {"must be a list of strings or one comma-separated string", [](const json &v) {
              return v.is_string() ||
                     (v.is_array() && std::all_of(v.begin(), v.end(),
                                                  [](const json &e) { return e.is_string(); }));
            }};
  else if constexpr (std::is_same_v<T, std::vector<std::vector<std::string>>>)
    return {"must be a list of lists of strings", [](const json &v) {
              return v.is_array() && std::all_of(v.begin(), v.end(), [](const json &part) {
                       return part.is_array() &&
                              std::all_of(part.begin(), part.end(),
                                          [](const json &e) { return e.is_string(); });
                     });
            }};
  else {
    static_assert(std::is_same_v<T, std::array<double, 2>>, "unsupported kind");
    return {"must be an array of 2 numbers", [](const json &v) {
              return v.is_array() && v.size() == 2 && v[0].is_number() &&
                     v[1].is_number();
            }};
  }
}

/// The value of `v`, of the kind kindOf<T> accepts and, for a closed set,
/// a word of it or "" (unset) where T is optional: the field's rule passed.
template <typename T> T fromJson(const json &v) {
  if constexpr (isClosedSet<T>) {
    using E = typename ClosedSetOf<T>::type;
    std::string word = v.get<std::string>();
    if constexpr (std::is_enum_v<T>)
      return parseWord<E>(word).value();
    else
      return word.empty() ? std::nullopt : parseWord<E>(word);
  } else if constexpr (std::is_same_v<T, std::optional<double>>)
    return v.is_null() ? std::nullopt : std::optional<double>(v.get<double>());
  else if constexpr (std::is_same_v<T, json>)
    return v;
  else if constexpr (isClosedSetList<T>) {
    T values;
    for (const std::string &word : fromJson<std::vector<std::string>>(v))
      values.push_back(parseWord<typename ClosedSetListOf<T>::type>(word).value());
    return values;
  } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
    if (v.is_array())
      return v.get<std::vector<std::string>>();
    // "a.json,b.json", as torchtitan's list options read on a command line.
    std::vector<std::string> items;
    std::string text = v.get<std::string>();
    for (size_t start = 0; start <= text.size();) {
      size_t comma = std::min(text.find(',', start), text.size());
      if (comma > start)
        items.push_back(text.substr(start, comma - start));
      start = comma + 1;
    }
    return items;
  }
  else
    return v.get<T>();
}

template <typename T> json toJsonValue(const T &value) {
  if constexpr (std::is_enum_v<T>)
    return std::string(wordOf(value));
  else if constexpr (isClosedSet<T>)
    return value ? std::string(wordOf(*value)) : std::string();
  else if constexpr (std::is_same_v<T, std::optional<double>>)
    return value ? json(*value) : json(nullptr);
  else if constexpr (isClosedSetList<T>) {
    json words = json::array();
    for (auto v : value)
      words.push_back(std::string(wordOf(v)));
    return words;
  } else
    return json(value);
}

Rule oneOf(std::vector<std::string> choices, bool ignoreCase = false);
Rule eachOneOf(std::vector<std::string> choices);
Rule orUnset(Rule rule);

/// A key of TrainConfig::*sec's `member`, checked by `rule`: by default, for
/// a closed set, one of its words (or "", unset, where the member is optional).
template <typename S, typename T>
Field field(const char *section, const char *key, const char *description, S TrainConfig::*sec,
            T S::*member, std::optional<Rule> rule = std::nullopt) {
  if constexpr (isClosedSet<T>) {
    if (!rule) {
      rule = oneOf(wordsOf<typename ClosedSetOf<T>::type>());
      if constexpr (!std::is_enum_v<T>)
        rule = orUnset(*rule);
    }
  }
  if constexpr (isClosedSetList<T>)
    if (!rule)
      rule = eachOneOf(wordsOf<typename ClosedSetListOf<T>::type>());
  auto [kindText, isKind] = kindOf<T>();
  return {section,
          key,
          description,
          kindText,
          isKind,
          [=](TrainConfig &c, const json &v) { (c.*sec).*member = fromJson<T>(v); },
          [=](const TrainConfig &c) { return toJsonValue((c.*sec).*member); },
          std::move(rule),
          std::is_same_v<T, std::string> || isClosedSet<T>};
}

/// Numeric rules; null (an unset optional) always passes.
Rule numberRule(std::string what, std::function<bool(double)> ok) {
  return {std::move(what),
          [ok](const json &v) { return v.is_null() || ok(v.get<double>()); }};
}
Rule positive() {
  return numberRule("must be > 0", [](double x) { return x > 0; });
}
Rule nonNegative() {
  return numberRule("must be >= 0", [](double x) { return x >= 0; });
}
Rule unitInterval() {
  return numberRule("must be in [0, 1]", [](double x) { return x >= 0 && x <= 1; });
}
Rule betasRule() {
  return {"must be two numbers in [0, 1)", [](const json &v) {
            return std::all_of(v.begin(), v.end(), [](const json &b) {
              return b.get<double>() >= 0 && b.get<double>() < 1;
            });
          }};
}

/// `rule`, or the empty string (unset: the command's default).
Rule orUnset(Rule rule) {
  return {rule.what, [ok = rule.ok](const json &v) { return v.get<std::string>().empty() || ok(v); }};
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return char(std::tolower(c)); });
  return s;
}

Rule oneOf(std::vector<std::string> choices, bool ignoreCase) {
  std::string what = "must be one of";
  for (size_t i = 0; i < choices.size(); ++i)
    what += (i ? ", \"" : " \"") + choices[i] + "\"";
  if (ignoreCase)
    what += " (any letter case)";
  return {what, [choices, ignoreCase](const json &v) {
            auto norm = [&](const std::string &s) { return ignoreCase ? lower(s) : s; };
            std::string s = norm(v.get<std::string>());
            return std::any_of(choices.begin(), choices.end(),
                               [&](const std::string &c) { return norm(c) == s; });
          }};
}

Rule eachOneOf(std::vector<std::string> choices) {
  Rule one = oneOf(choices);
  return {"each " + one.what, [ok = one.ok](const json &v) {
            for (const std::string &item : fromJson<std::vector<std::string>>(v))
              if (!ok(json(item)))
                return false;
            return true;
          }};
}

const std::vector<Field> &fields() {
  using C = TrainConfig;
  static const std::vector<Field> table = {
      field("model", "hf_path", "a Hugging Face directory (config.json, safetensors) to train; or model.flavor",
            &C::model, &C::Model::hfPath),
      field("model", "flavor", "a built-in Qwen3 flavor, randomly initialised (kiln capture --list-flavors); or model.hf_path",
            &C::model, &C::Model::flavor),
      field("model", "converters", "[\"float8\"]: torchao's Float8 linears, priced by kiln plan (kiln train and compile refuse them)",
            &C::model, &C::Model::converters),
      field("float8", "recipe_name", "Float8 scaling: tensorwise and rowwise run a linear's three GEMMs in float8, rowwise_with_gw_hp keeps the weight gradient's in bf16",
            &C::float8, &C::Float8::recipeName),
      field("float8", "filter_fqns", "linears whose fqn contains one of these stay in bf16 (torchtitan's Dec 2024 runs: output)",
            &C::float8, &C::Float8::filterFqns),

      field("training", "steps", "optimizer steps to run",
            &C::training, &C::Training::steps, positive()),
      field("training", "local_batch_size", "sequences per microbatch on each data-parallel rank (a step without accumulation is one microbatch)",
            &C::training, &C::Training::localBatchSize, positive()),
      field("training", "global_batch_size", "sequences per optimizer step over all data-parallel ranks; more than local_batch_size x the data-parallel degree accumulates gradients over microbatches (-1: no accumulation)",
            &C::training, &C::Training::globalBatchSize,
            Rule{"must be -1 or > 0", [](const json &v) {
                   return v.get<int64_t>() == -1 || v.get<int64_t>() > 0;
                 }}),
      field("training", "seq_len", "tokens per sequence",
            &C::training, &C::Training::seqLen, positive()),
      field("training", "max_norm", "gradient clipping: the global gradient norm's ceiling",
            &C::training, &C::Training::maxNorm, positive()),
      field("training", "seed", "the seed of the initial weights",
            &C::training, &C::Training::seed),
      field("training", "mixed_precision_param", "parameters' compute precision; unset: float32 for kiln train, bfloat16 for kiln compile",
            &C::training,
            &C::Training::mixedPrecisionParam),
      field("training", "mixed_precision_reduce", "gradient reductions' precision",
            &C::training,
            &C::Training::mixedPrecisionReduce, oneOf({std::string(wordOf(PrecisionDtype::Float32))})),

      field("optimizer", "name", "the optimizer",
            &C::optimizer, &C::Optimizer::name, oneOf({"AdamW"}, true)),
      field("optimizer", "lr", "the peak learning rate",
            &C::optimizer, &C::Optimizer::lr, positive()),
      field("optimizer", "betas", "AdamW's moment decay rates",
            &C::optimizer, &C::Optimizer::betas, betasRule()),
      field("optimizer", "eps", "AdamW's epsilon",
            &C::optimizer, &C::Optimizer::eps, positive()),
      field("optimizer", "weight_decay", "AdamW's decoupled weight decay",
            &C::optimizer, &C::Optimizer::weightDecay, nonNegative()),

      field("lr_scheduler", "warmup_steps", "steps of linear warmup to optimizer.lr",
            &C::lrScheduler, &C::LrScheduler::warmupSteps,
            nonNegative()),
      field("lr_scheduler", "decay_ratio", "the fraction of steps that decays; null: every step after warmup",
            &C::lrScheduler, &C::LrScheduler::decayRatio,
            unitInterval()),
      field("lr_scheduler", "decay_type", "the decay's shape",
            &C::lrScheduler, &C::LrScheduler::decayType),
      field("lr_scheduler", "min_lr_factor", "the final learning rate as a fraction of optimizer.lr",
            &C::lrScheduler, &C::LrScheduler::minLrFactor,
            unitInterval()),

      field("activation_checkpoint", "mode", "what the backward recomputes instead of saving",
            &C::activationCheckpoint,
            &C::ActivationCheckpoint::mode),
      field("activation_checkpoint", "selective_ac_option", "with mode selective: \"op\", or N to checkpoint every N-th layer",
            &C::activationCheckpoint,
            &C::ActivationCheckpoint::selectiveAcOption,
            Rule{"must be \"op\" or a positive integer N (checkpoint every N-th layer)",
                 [](const json &v) {
                   return parseSelectiveAcOption(v.get<std::string>()).has_value();
                 }}),

      field("checkpoint", "enable", "save full checkpoints every interval steps and resume from the folder's latest",
            &C::checkpoint, &C::Checkpoint::enable),
      field("checkpoint", "folder", "where checkpoints go",
            &C::checkpoint, &C::Checkpoint::folder),
      field("checkpoint", "initial_load_path", "a checkpoint to start from",
            &C::checkpoint, &C::Checkpoint::initialLoadPath),
      field("checkpoint", "initial_load_in_hf", "initial_load_path is a Hugging Face directory",
            &C::checkpoint, &C::Checkpoint::initialLoadInHf),
      field("checkpoint", "last_save_model_only", "the final save holds the model alone",
            &C::checkpoint,
            &C::Checkpoint::lastSaveModelOnly),
      field("checkpoint", "last_save_in_hf", "a final model save in Hugging Face safetensors, even without enable",
            &C::checkpoint, &C::Checkpoint::lastSaveInHf),
      field("checkpoint", "interval", "steps between saves",
            &C::checkpoint, &C::Checkpoint::interval, positive()),
      field("checkpoint", "keep_latest_k", "checkpoints kept; 0 keeps all",
            &C::checkpoint, &C::Checkpoint::keepLatestK,
            nonNegative()),
      field("checkpoint", "load_step", "the step to resume from; -1: the latest",
            &C::checkpoint, &C::Checkpoint::loadStep,
            Rule{"must be -1 (the latest) or >= 0", [](const json &v) {
                   return v.get<int64_t>() >= -1;
                 }}),
      field("checkpoint", "max_shard_bytes", "the largest safetensors file a save writes",
            &C::checkpoint, &C::Checkpoint::maxShardBytes,
            positive()),

      field("metrics", "log_freq", "steps between logged lines",
            &C::metrics, &C::Metrics::logFreq, positive()),
      field("metrics", "jsonl", "a file of one JSON line per logged step and evaluation",
            &C::metrics, &C::Metrics::jsonl),
      field("metrics", "eval_freq", "steps between validations; 0: before and after training only",
            &C::metrics, &C::Metrics::evalFreq, nonNegative()),
      field("metrics", "loss_curve", "an SVG of the train and validation loss",
            &C::metrics, &C::Metrics::lossCurve),
      field("metrics", "enable_tensorboard", "write the logged scalars as TensorBoard event files (rank 0), under torchtitan's names",
            &C::metrics, &C::Metrics::enableTensorboard),
      field("metrics", "save_tb_folder", "the event files' folder (relative: to the working directory), each run in a <YYYYmmdd-HHMM> folder inside",
            &C::metrics, &C::Metrics::saveTbFolder),

      field("data", "source", "where the tokens come from (docs/data.md)",
            &C::data, &C::Data::source,
            oneOf({"tokens", "text", "jsonl", "brown"})),
      field("data", "tokens_file", "source tokens: one global batch of token ids, used every step",
            &C::data, &C::Data::tokensFile),
      field("data", "path", "source text or jsonl: the file or folder",
            &C::data, &C::Data::path),
      field("data", "tokenizer", "a tokenizer.json; default: the fetched Qwen3 one",
            &C::data, &C::Data::tokenizer),
      field("data", "seq_len", "0: training.seq_len; else it overrides it",
            &C::data, &C::Data::seqLen, nonNegative()),
      field("data", "seed", "the seed of the batches' order",
            &C::data, &C::Data::seed),
      field("data", "validation_fraction", "the share of the data held out for validation",
            &C::data, &C::Data::validationFraction,
            Rule{"must be in [0, 1)", [](const json &v) {
                   return v.get<double>() >= 0 && v.get<double>() < 1;
                 }}),
      field("data", "cache_dir", "where tokenized data is cached",
            &C::data, &C::Data::cacheDir),
      field("data", "save_validation_tokens", "write the held-out batches as a token file for kiln eval",
            &C::data, &C::Data::saveValidationTokens),

      field("parallelism", "data_parallel_replicate_degree", "ranks holding whole replicas (HSDP's replicate dimension)",
            &C::parallelism,
            &C::Parallelism::dataParallelReplicateDegree, positive()),
      field("parallelism", "data_parallel_shard_degree", "ranks sharding the weights (FSDP2); -1: the ranks left",
            &C::parallelism,
            &C::Parallelism::dataParallelShardDegree,
            Rule{"must be -1 or > 0", [](const json &v) {
                   return v.get<int64_t>() == -1 || v.get<int64_t>() > 0;
                 }}),
      field("parallelism", "tensor_parallel_degree", "ranks splitting each layer's matmuls",
            &C::parallelism,
            &C::Parallelism::tensorParallelDegree, positive()),
      field("parallelism", "expert_parallel_degree", "MoE: ranks of the dp_shard group splitting the experts",
            &C::parallelism,
            &C::Parallelism::expertParallelDegree, positive()),
      field("parallelism", "expert_dispatch", "MoE: how tokens reach the experts",
            &C::parallelism, &C::Parallelism::expertDispatch),
      field("parallelism", "expert_capacity_factor", "MoE all_to_all: GShard's capacity factor; 0 drops nothing",
            &C::parallelism,
            &C::Parallelism::expertCapacityFactor, nonNegative()),
      field("parallelism", "enable_sequence_parallel", "with TP: norms and residuals split over the sequence",
            &C::parallelism,
            &C::Parallelism::enableSequenceParallel),
      field("parallelism", "context_parallel_degree", "ranks splitting each sequence (cp; attention gathers keys and values over them)",
            &C::parallelism, &C::Parallelism::contextParallelDegree, positive()),
      field("parallelism", "context_parallel_load_balancer", "cp: headtail gives each rank a head and a tail chunk of the sequence (balanced causal work); none: contiguous blocks",
            &C::parallelism, &C::Parallelism::contextParallelLoadBalancer),
      field("parallelism", "fsdp_reshard_after_forward", "FSDP2: free the gathered weights after the forward",
            &C::parallelism,
            &C::Parallelism::fsdpReshardAfterForward),
      field("parallelism", "pipeline_parallel_degree", "ranks the model's stages are pipelined over (pp, the outermost grid axis; 1: off)",
            &C::parallelism, &C::Parallelism::pipelineParallelDegree, positive()),
      field("parallelism", "pipeline_parallel_schedule", "the order of the pipeline's microbatches",
            &C::parallelism, &C::Parallelism::pipelineParallelSchedule),
      field("parallelism", "pipeline_parallel_microbatch_size", "rows of a pipeline microbatch; must divide training.local_batch_size",
            &C::parallelism, &C::Parallelism::pipelineParallelMicrobatchSize, positive()),
      field("parallelism", "pipeline_parallel_layers_per_stage", "layers of each (virtual) stage; 0: one stage per rank, two with Interleaved1F1B",
            &C::parallelism, &C::Parallelism::pipelineParallelLayersPerStage, nonNegative()),
      field("parallelism", "pipeline_parallel_first_stage_less_layers", "layers the embedding counts as in the generated split",
            &C::parallelism, &C::Parallelism::pipelineParallelFirstStageLessLayers, nonNegative()),
      field("parallelism", "pipeline_parallel_last_stage_less_layers", "layers the norm and output count as in the generated split",
            &C::parallelism, &C::Parallelism::pipelineParallelLastStageLessLayers, nonNegative()),
      field("parallelism", "module_fqns_per_model_part", "the stages' modules, listed: [[\"tok_embeddings\", \"layers.0\"], [\"layers.1\", \"norm\", \"output\"]]; empty: generated",
            &C::parallelism, &C::Parallelism::moduleFqnsPerModelPart),
      field("parallelism", "world_size", "ranks of the run; 0: the launcher's",
            &C::parallelism, &C::Parallelism::worldSize,
            nonNegative()),

      field("override", "rules", "kernel substitution rules (docs/kernels.md)",
            &C::overrides, &C::Override::rules),
      field("override", "files", "rule files, a list or a.json,b.json",
            &C::overrides, &C::Override::files),

      field("target", "name", "the machine kernel constraints are checked against; unset: cpu for kiln train and calibrate-cpu, whose kernels run here, trn2 for compile, check-hlo, capture and plan",
            &C::target, &C::Target::name),
      // Logical NeuronCores: 1 or 2 physical cores each (trn2's LNC=1 or 2).
      field("target", "lnc", "logical NeuronCore size: 1 or 2 physical cores",
            &C::target, &C::Target::lnc,
            numberRule("must be 1 or 2", [](double x) { return x == 1 || x == 2; })),
      field("target", "neuron_max_communicators", "distinct replica-group lists a NEFF may hold (kiln compile)",
            &C::target,
            &C::Target::neuronMaxCommunicators, positive()),

      field("compile", "enable", "train with the step compiled for the CPU (docs/compiled.md)",
            &C::compile, &C::Compile::enable),
      field("compile", "backend", "what compiled mode compiles for",
            &C::compile, &C::Compile::backend, oneOf({"cpu"})),
      field("compile", "artifact", "a kiln compile --target cpu folder: its step is linked, not compiled (needs compile.enable)",
            &C::compile, &C::Compile::artifact),

      field("debug", "save_grads", "write the first step's raw gradients to this file under HF keys",
            &C::debug, &C::Debug::saveGrads),
      field("debug", "kill_during_save", "crash test: SIGKILL the run while it saves this step's checkpoint",
            &C::debug, &C::Debug::killDuringSave, nonNegative()),
      field("debug", "kill_during_compile", "crash test: kiln compile SIGKILLs itself before its artifacts replace -o",
            &C::debug, &C::Debug::killDuringCompile),
      field("debug", "fail_collective_on_rank", "fault test, compiled mode: this rank's first collective of each step fails",
            &C::debug, &C::Debug::failCollectiveOnRank,
            numberRule("must be >= -1", [](double x) { return x >= -1; })),
  };
  return table;
}

/// Comma-separated, first-seen order (the table's order, i.e. the documented one).
std::string knownList(const std::string &section) {
  std::vector<std::string> names;
  for (const Field &f : fields()) {
    const std::string &name = section.empty() ? f.section : f.key;
    if ((section.empty() || f.section == section) &&
        std::find(names.begin(), names.end(), name) == names.end())
      names.push_back(name);
  }
  std::string out;
  for (const std::string &n : names)
    out += (out.empty() ? "" : ", ") + n;
  return out;
}

bool isSection(const std::string &section) {
  return std::any_of(fields().begin(), fields().end(),
                     [&](const Field &f) { return f.section == section; });
}

/// Edits (insertions, deletions, substitutions) from `a` to `b`.
size_t editDistance(const std::string &a, const std::string &b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j)
    row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] != b[j - 1])});
      diagonal = above;
    }
  }
  return row[b.size()];
}

/// "; did you mean 'section.key'?" for the known key nearest to `name`
/// (a third of its letters changed at most), "" when none is near.
std::string suggestion(const std::string &name) {
  std::string best;
  size_t bestDistance = name.size() / 3 + 1;
  for (const Field &f : fields()) {
    std::string known = f.section + "." + f.key;
    if (size_t d = editDistance(name, known); d < bestDistance) {
      best = known;
      bestDistance = d;
    }
  }
  return best.empty() ? "" : "; did you mean '" + best + "'?";
}

void requireSection(const std::string &section, const std::string &key,
                    const std::string &source) {
  if (!isSection(section))
    fail("{}: unknown section '{}' (known: {}){}", source, section, knownList(""),
         suggestion(section + "." + key));
}

const Field &findField(const std::string &section, const std::string &key,
                       const std::string &source) {
  requireSection(section, key, source);
  for (const Field &f : fields())
    if (f.section == section && f.key == key)
      return f;
  std::string known = knownList(section);
  if (section == "model")
    for (const std::string &name : Qwen3Config::hfFieldNames())
      known += ", " + name;
  fail("{}: unknown key '{}.{}' (known in '{}': {}){}", source, section, key, section, known,
       suggestion(section + "." + key));
}

void assign(TrainConfig &config, const Field &f, const json &value,
            const std::string &source) {
  if (!f.isKind(value))
    fail("{}: '{}.{}' {}, got {}", source, f.section, f.key, f.kindText, briefJson(value));
  if (f.rule && !f.rule->ok(value))
    fail("{}: '{}.{}' {}, got {}", source, f.section, f.key, f.rule->what, briefJson(value));
  f.set(config, value);
  config.explicitKeys.insert(f.section + "." + f.key);
}

/// `model.<key>` for a config.json field: kept for Qwen3Config::withOverrides,
/// which checks the value against the model.
bool assignModelField(TrainConfig &config, const std::string &section, const std::string &key,
                      const json &value) {
  const std::vector<std::string> &names = Qwen3Config::hfFieldNames();
  if (section != "model" || std::find(names.begin(), names.end(), key) == names.end())
    return false;
  config.model.overrides[key] = value;
  config.explicitKeys.insert(section + "." + key);
  return true;
}

void applyFile(TrainConfig &config, const std::string &path) {
  ConfigDocument doc = ConfigDocument::read(path);
  for (const auto &[section, body] : doc.sections.items()) {
    requireSection(section, body.is_object() && !body.empty() ? body.begin().key() : "",
                   doc.where(section, ""));
    if (!body.is_object())
      fail("{}: section '{}' must be an object, got {}", doc.where(section, ""), section,
           briefJson(body));
    for (const auto &[key, value] : body.items())
      if (!assignModelField(config, section, key, value))
        assign(config, findField(section, key, doc.where(section, key)), value,
               doc.where(section, key));
  }
  if (!doc.ignored.empty()) {
    std::string keys;
    for (const std::string &k : doc.ignored)
      keys += (keys.empty() ? "" : ", ") + k;
    fmt::print(stderr, "warning: {}: torchtitan keys without a use in Kiln, ignored: {} "
                       "(docs/cli.md says why)\n", path, keys);
  }
}

void applyOverride(TrainConfig &config, const std::string &text) {
  std::string word = text.rfind("--", 0) == 0 ? text.substr(2) : text;
  size_t eq = word.find('=');
  std::string name = word.substr(0, eq);
  size_t dot = name.find('.');
  if (eq == std::string::npos || dot == std::string::npos || dot == 0 ||
      dot + 1 == name.size())
    fail("{}: override '{}' must have the form --section.key=value", kCommandLine, text);
  std::string raw = word.substr(eq + 1);
  if (jsonTooDeep(raw))
    fail("{}: the value of '{}' is JSON nested deeper than {} levels", kCommandLine, name,
         kMaxJsonDepth);
  json parsed = json::parse(raw, nullptr, /*allow_exceptions=*/false);
  if (assignModelField(config, name.substr(0, dot), name.substr(dot + 1),
                       parsed.is_discarded() ? json(raw) : parsed))
    return;
  const Field &f = findField(name.substr(0, dot), name.substr(dot + 1), kCommandLine);
  json value = parsed;
  // Plain words are strings; string keys also keep text that happens to be
  // JSON (--data.tokens_file=2024 names a file, not a number).
  if (value.is_discarded() || (f.isString && !value.is_string()))
    value = raw;
  assign(config, f, value, kCommandLine);
}

} // namespace

TrainConfig TrainConfig::load(const std::string &path,
                              const std::vector<std::string> &overrides) {
  TrainConfig config;
  if (!path.empty())
    applyFile(config, path);
  for (const std::string &o : overrides)
    applyOverride(config, o);
  if (config.model.hfPath.empty() == config.model.flavor.empty())
    fail("model: set exactly one of model.hf_path and model.flavor ({})",
         config.model.hfPath.empty() ? "neither is set" : "both are set");
  // torchtitan keeps the sequence length with the data; Kiln captures with
  // training.seq_len, so data.seq_len, when given, is the one that counts.
  if (config.data.seqLen > 0)
    config.training.seqLen = config.data.seqLen;
  // Rules are checked now, so a typo stops the run before any work.
  (void)config.overrideRules();
  return config;
}

std::vector<ConfigKey> TrainConfig::schema() {
  const TrainConfig defaults;
  std::vector<ConfigKey> keys;
  for (const Field &f : fields()) {
    std::string type = f.kindText.substr(f.kindText.find(' ') + 1); // past "must"
    for (const char *article : {"be an ", "be a ", "be "})
      if (type.rfind(article, 0) == 0) {
        type = type.substr(std::strlen(article));
        break;
      }
    std::string allowed = f.rule ? f.rule->what : "";
    if (allowed.rfind("must be ", 0) == 0)
      allowed = allowed.substr(8);
    keys.push_back({f.section, f.key, type, f.get(defaults), allowed, f.description});
  }
  return keys;
}

json TrainConfig::toJson() const {
  json out = json::object();
  for (const Field &f : fields())
    out[f.section][f.key] = f.get(*this);
  for (const auto &[key, value] : model.overrides.items())
    out["model"][key] = value;
  return out;
}

int64_t TrainConfig::Training::microbatches(int64_t dp) const {
  if (globalBatchSize == -1)
    return 1;
  // Bounded before the product, which a fuzzed config could overflow.
  int64_t perStep = localBatchSize <= globalBatchSize / std::max<int64_t>(dp, 1)
                        ? localBatchSize * dp
                        : 0;
  if (perStep == 0 || globalBatchSize % perStep)
    fail("training.global_batch_size = {} must be a multiple of training.local_batch_size = {} "
         "x the data-parallel degree {} (dp_replicate x dp_shard)",
         globalBatchSize, localBatchSize, dp);
  return globalBatchSize / perStep;
}

bool TrainConfig::float8Linears() const {
  return std::find(model.converters.begin(), model.converters.end(), ModelConverter::Float8) !=
         model.converters.end();
}

void TrainConfig::refusePlanOnly(const char *command) const {
  if (float8Linears())
    fail("{}: model.converters=[\"float8\"]: Kiln's runtime and its Neuron artifacts compute "
         "in float32 and bf16; Float8 linears are priced by kiln plan only",
         command);
}

std::vector<OverrideRule> TrainConfig::overrideRules() const {
  std::vector<OverrideRule> rules = parseOverrideRules(overrides.rules, "override.rules");
  for (const std::string &file : overrides.files) {
    std::vector<OverrideRule> loaded = loadOverrideRuleFile(file);
    rules.insert(rules.end(), loaded.begin(), loaded.end());
  }
  return rules;
}

Qwen3Config TrainConfig::Model::resolve() const {
  Qwen3Config base = hfPath.empty() ? Qwen3Config::resolve(flavor)
                                    : Qwen3Config::fromHfDirectory(hfPath);
  return base.withOverrides(overrides, "model overrides");
}

} // namespace kiln
