//===- TrainConfig.h - Run configuration for `kiln train` -------*- C++ -*-===//
//
// The torchtitan-style job configuration: sections of keys with torchtitan's
// defaults, read from an optional JSON file ({"training": {"steps": 100},
// ...}) and then overridden by `--section.key=value` command-line words, in
// that order. Every key is one row of a table in TrainConfig.cpp giving its
// JSON kind and range, so adding a key is one line there plus the member.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_DRIVER_TRAINCONFIG_H
#define KILN_DRIVER_TRAINCONFIG_H

#include "kiln/Config/OverrideRules.h"
#include "kiln/Frontend/Qwen3Config.h"
#include "kiln/Support/ClosedSets.h"

#include <nlohmann/json.hpp>

#include <array>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace kiln {

/// One key of the run configuration, as `kiln help` and docs/cli.md show it.
struct ConfigKey {
  std::string section, key;
  std::string type;             ///< "integer", "string", "list of strings or ...", ...
  nlohmann::json defaultValue;  ///< a default-constructed TrainConfig's
  std::string allowed;          ///< the values beyond the type ("> 0", "one of ..."), or ""
  std::string description;      ///< one line
};

struct TrainConfig {
  struct Model {
    std::string hfPath; ///< HF directory (config.json + safetensors) to start from
    std::string flavor; ///< or a built-in flavor name, randomly initialised
    /// config.json fields replaced by their HF names ("model.num_experts=64"),
    /// as a JSON object; applied by resolve().
    nlohmann::json overrides = nlohmann::json::object();
    /// torchtitan's model converters: ["float8"] swaps the linears for
    /// torchao's Float8 ones. Planned only (kiln plan); kiln train and
    /// compile refuse it (refusePlanOnly).
    std::vector<ModelConverter> converters;
    /// The model hf_path or flavor names, with the overrides applied.
    Qwen3Config resolve() const;
  } model;

  /// torchtitan's float8 converter options (with model.converters float8).
  struct Float8 {
    Float8Recipe recipeName = Float8Recipe::Rowwise;
    /// Linears whose fqn contains one of these stay in bf16 (torchtitan's
    /// module filter; its Dec 2024 runs kept "output").
    std::vector<std::string> filterFqns;
  } float8;

  /// Whether model.converters asks for Float8 linears.
  bool float8Linears() const;
  /// Fails, naming the option, where the run asks for what only kiln plan
  /// prices (Float8 linears): `command` is the refusing command's name.
  void refusePlanOnly(const char *command) const;

  struct Training {
    int64_t steps = 10000;
    int64_t localBatchSize = 8;
    /// Sequences per optimizer step over all data-parallel ranks; -1: one
    /// microbatch (local_batch_size x the data-parallel degree).
    int64_t globalBatchSize = -1;
    /// Microbatches whose gradients a step accumulates under a data-parallel
    /// degree `dp`: global_batch_size / (local_batch_size x dp). Throws
    /// kiln::Error naming the three numbers when that does not divide.
    int64_t microbatches(int64_t dp) const;
    /// Sequences per optimizer step: local x dp x microbatches(dp).
    int64_t globalBatch(int64_t dp) const { return localBatchSize * dp * microbatches(dp); }
    int64_t seqLen = 2048;
    double maxNorm = 1.0; ///< gradient-norm clipping threshold
    int64_t seed = 0;
    /// torchtitan's mixed precision; unset ("" in the config): the command's
    /// (bfloat16 for kiln compile's Neuron targets, float32 for kiln train
    /// on CPU), see paramDtypeOr.
    std::optional<PrecisionDtype> mixedPrecisionParam;
    PrecisionDtype paramDtypeOr(PrecisionDtype commandDefault) const {
      return mixedPrecisionParam.value_or(commandDefault);
    }
    /// float32, the only one (torchtitan's too).
    PrecisionDtype mixedPrecisionReduce = PrecisionDtype::Float32;
  } training;

  struct Optimizer {
    std::string name = "AdamW"; ///< the only one implemented (any letter case)
    double lr = 8e-4;
    std::array<double, 2> betas{0.9, 0.95};
    double eps = 1e-8;
    double weightDecay = 0.1;
  } optimizer;

  struct LrScheduler {
    int64_t warmupSteps = 200;
    /// Fraction of the steps spent decaying at the end; nullopt (torchtitan's
    /// None) decays over every step after warmup.
    std::optional<double> decayRatio;
    DecayType decayType = DecayType::Linear;
    double minLrFactor = 0.0; ///< final lr as a fraction of lr
  } lrScheduler;

  /// torchtitan's `activation_checkpoint` section (kiln-activation-checkpoint).
  struct ActivationCheckpoint {
    CheckpointMode mode = CheckpointMode::None;
    /// With mode "selective": "op" (save matmul results, recompute the rest)
    /// or N, a positive integer: checkpoint every N-th layer.
    std::string selectiveAcOption = "2";
  } activationCheckpoint;

  struct Checkpoint {
    /// Save the full training state every `interval` steps and at the end,
    /// and resume from the folder's latest such checkpoint at start-up.
    bool enable = false;
    std::string folder = "checkpoint";
    std::string initialLoadPath;
    bool initialLoadInHf = false;
    /// The final save holds only the model (torchtitan's default).
    bool lastSaveModelOnly = true;
    bool lastSaveInHf = false;
    int64_t interval = 500;
    /// Keep the newest k step-N directories, deleting older ones after each
    /// save (0: keep all).
    int64_t keepLatestK = 10;
    /// The step to resume from; -1: the latest resumable one.
    int64_t loadStep = -1;
    int64_t maxShardBytes = 2000000000;
  } checkpoint;

  struct Metrics {
    int64_t logFreq = 10;
    std::string jsonl;     ///< one JSON line per logged step and evaluation, if set
    int64_t evalFreq = 0;  ///< validation loss every N steps (0: only at the end)
    std::string lossCurve; ///< SVG of train and validation loss, if set
    /// TensorBoard event files of the logged scalars (rank 0), under
    /// saveTbFolder/<YYYYmmdd-HHMM>/ as torchtitan lays them out.
    bool enableTensorboard = false;
    std::string saveTbFolder = "tb";
  } metrics;

  struct Data {
    /// "tokens": the fixed batch in tokens_file, every step; "text", "jsonl"
    /// or "brown": documents at `path`, tokenized and packed.
    std::string source = "tokens";
    std::string tokensFile;
    std::string path;      ///< "" with source "brown": the fetched corpus
    std::string tokenizer; ///< tokenizer.json ("": the fetched Qwen3 one)
    int64_t seqLen = 0;    ///< 0: training.seq_len; else overrides it
    int64_t seed = 0;      ///< shuffling seed
    double validationFraction = 0.0;
    std::string cacheDir;  ///< tokenized-corpus cache ("": under the asset cache)
    /// Write the held-out batches as a token file (for `kiln eval`), if set.
    std::string saveValidationTokens;
  } data;

  /// torchtitan's `parallelism` section; resolved and validated against the
  /// model and the world by ParallelLayout::resolve.
  struct Parallelism {
    int64_t dataParallelReplicateDegree = 1;
    int64_t dataParallelShardDegree = -1; ///< -1: what the other degrees leave
    int64_t tensorParallelDegree = 1;
    /// MoE experts split over this many of the data_parallel_shard_degree
    /// ranks (torchtitan's expert_parallel_degree: EP borrows from dp_shard).
    int64_t expertParallelDegree = 1;
    /// How tokens reach the experts of other ranks: all_gather (every rank
    /// of the expert group computes its experts over the group's tokens) or
    /// all_to_all (kiln-expert-dispatch's capacity buffer, exchanged by
    /// all-to-all).
    ExpertDispatcher expertDispatch = ExpertDispatcher::AllGather;
    /// all_to_all's capacity per block and token chunk, as a multiple of an
    /// even share of the pairs (GShard's capacity factor); 0 drops nothing.
    double expertCapacityFactor = 0;
    bool enableSequenceParallel = true;   ///< applies when tp > 1
    /// Context parallelism (torchtitan's names): ranks of grid axis cp the
    /// sequence is split over, and how it is laid out over them.
    int64_t contextParallelDegree = 1;
    ContextParallelLoadBalancer contextParallelLoadBalancer = ContextParallelLoadBalancer::HeadTail;
    /// Pipeline parallelism (torchtitan's names): ranks of the outermost
    /// grid axis `pp`, the schedule, the rows of one microbatch of a
    /// data-parallel rank's batch, and the stages (PipelineStages.h): listed
    /// in module_fqns_per_model_part, or generated with layers_per_stage
    /// (0: one stage per rank, two when interleaved) and the embedding and
    /// output counted as the first and last stage's less layers.
    int64_t pipelineParallelDegree = 1;
    PipelineScheduleKind pipelineParallelSchedule = PipelineScheduleKind::OneFOneB;
    int64_t pipelineParallelMicrobatchSize = 1;
    int64_t pipelineParallelLayersPerStage = 0;
    int64_t pipelineParallelFirstStageLessLayers = 1;
    int64_t pipelineParallelLastStageLessLayers = 1;
    std::vector<std::vector<std::string>> moduleFqnsPerModelPart;
    ReshardAfterForward fsdpReshardAfterForward = ReshardAfterForward::Default;
    int64_t worldSize = 0; ///< compile-only runs; 0: the launcher's (1 without MPI)
  } parallelism;

  /// Kernel substitution (kiln-substitute-kernels): rules inline and rule
  /// files, applied in that order.
  struct Override {
    nlohmann::json rules = nlohmann::json::array();
    std::vector<std::string> files;
  } overrides;

  /// The machine kernels are checked against (KernelTarget).
  struct Target {
    /// The machine kernel constraints are checked against; "" (unset): the
    /// command's, cpu where the kernels run here (kiln train,
    /// calibrate-cpu), trn2 where they go to Neuron (compile, check-hlo,
    /// capture, plan), see nameOr.
    std::optional<TargetName> name;
    TargetName nameOr(TargetName commandDefault) const { return name.value_or(commandDefault); }
    int64_t lnc = 2;
    /// Communicators (distinct replica-group lists) the Neuron runtime
    /// allows one NEFF: 16 from the 2.32 runtime, 12 before.
    int64_t neuronMaxCommunicators = 16;
  } target;

  /// Every override rule, inline then from the files, parsed; throws
  /// kiln::Error naming the file or option and the rule.
  std::vector<OverrideRule> overrideRules() const;

  /// torchtitan's [compile]: with `enable`, the step runs as the per-rank
  /// HLO module compiled for the CPU (docs/compiled.md) instead of eagerly.
  struct Compile {
    bool enable = false;
    std::string backend = "cpu"; ///< the only one: MLIR's JIT for this CPU
    /// A kiln compile --target cpu folder whose step is linked instead of
    /// compiled (checked to be this run's); empty: compile here.
    std::string artifact;
  } compile;

  struct Debug {
    std::string saveGrads; ///< write the first step's gradients here, if set
    /// A crash test: SIGKILL this process while it saves the checkpoint of
    /// this step, before the checkpoint is complete (0: never).
    int64_t killDuringSave = 0;
    /// A crash test: `kiln compile` SIGKILLs itself once its artifacts are
    /// written to their temporary folder, before they replace the -o folder.
    bool killDuringCompile = false;
    /// A fault test: in compiled mode, this rank's first collective of each
    /// step fails (-1: none), so that a test sees one failing rank end all.
    int64_t failCollectiveOnRank = -1;
  } debug;

  /// Defaults, then the JSON file at `path` (skipped if empty), then each
  /// override ("--section.key=value" or "section.key=value"; the value is
  /// JSON if it parses, else a plain string). Throws kiln::Error naming the
  /// source and "section.key" for unknown keys, wrong types, out-of-range
  /// values, and if not exactly one of model.hf_path / model.flavor is set.
  static TrainConfig load(const std::string &path,
                          const std::vector<std::string> &overrides);

  /// The full effective configuration under the same section/key names.
  nlohmann::json toJson() const;
  /// Every key the parser reads, in the documented order, from the table it
  /// reads them with (lib/Driver/TrainConfig.cpp).
  static std::vector<ConfigKey> schema();

  /// "section.key" of every key the file or the command line set (the rest
  /// are defaults), e.g. to let a token file's shape fill in the batch.
  std::set<std::string> explicitKeys;
};

} // namespace kiln

#endif // KILN_DRIVER_TRAINCONFIG_H
