//===- Training.cpp - Capture and run whole training steps ----------------===//

#include "kiln/Driver/Training.h"
#include "kiln/CustomKernels/Registry.h"
#include "kiln/Dialect/Kiln/IR/KilnDialect.h"
#include "kiln/Dialect/Kiln/IR/Sharding.h"
#include "kiln/Driver/CompiledStep.h"
#include "kiln/Driver/CpuCompile.h"
#include "kiln/Driver/PipelineTraining.h"
#include "kiln/Driver/RankAgreement.h"
#include "kiln/Driver/RankSlices.h"
#include "kiln/Frontend/Qwen3Naming.h"

#include "kiln/Planner/MemoryPlan.h"
#include "kiln/Runtime/CpuPeak.h"
#include "kiln/Runtime/ForwardKernels.h"
#include "kiln/Runtime/HfCheckpoint.h"
#include "kiln/Runtime/TokenBatch.h"
#include "kiln/Support/Diagnostics.h"
#include "kiln/Support/Error.h"

#include "mlir/Pass/PassManager.h"

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <map>
#include <thread>
#include <random>
#include <set>
#include <sys/resource.h>
#include <unistd.h>

using namespace mlir;

namespace kiln {

OwningOpRef<ModuleOp> captureTrainingStep(MLIRContext &context, const Qwen3Config &model,
                                          const CaptureOptions &shape,
                                          const KilnPipelineOptions &options, LoweringStage stage) {
  OwningOpRef<ModuleOp> module;
  {
    TimingScope frontend =
        options.timing ? options.timing->nest("capture (frontend)") : TimingScope();
    module = captureQwen3(context, model, shape);
  }
  runKilnPipeline(*module, options, stage, LoweringStage::Captured,
                  (stage == LoweringStage::Forward ? "substituting the kernels of "
                                                   : "building the training step of ") +
                      model.name + " failed");
  return module;
}

OwningOpRef<ModuleOp> partitionLoss(ModuleOp module, const KilnPipelineOptions &options) {
  MLIRContext &context = *module.getContext();
  OpBuilder b(&context);
  OwningOpRef<ModuleOp> rank = ModuleOp::create(module.getLoc());
  b.setInsertionPointToStart(rank->getBody());
  b.clone(*module.lookupSymbol<func::FuncOp>("loss"));
  PassManager pm(&context);
  buildPartitionPipeline(pm, options, "loss");
  succeedOrFail(context, "building the per-rank @loss failed",
                [&] { return pm.run(*rank); });
  return rank;
}

namespace {
/// normal(0, 0.02) from a stream seeded by `seed` and `key`.
Tensor drawNormal(const std::string &key, const Shape &shape, uint64_t seed) {
  Tensor t(DType::F32, shape);
  float *data = t.mutableData<float>();
  std::seed_seq seq(key.begin(), key.end());
  std::vector<uint32_t> words(2);
  seq.generate(words.begin(), words.end());
  std::mt19937_64 rng(seed ^ (uint64_t(words[0]) << 32 | words[1]));
  std::normal_distribution<float> normal(0.0f, 0.02f);
  for (int64_t i = 0; i < t.numel(); ++i)
    data[i] = normal(rng);
  return t;
}
} // namespace

Tensor initialParameter(const Qwen3Parameter &p, uint64_t seed) {
  bool isNorm = p.module.size() >= 4 && p.module.compare(p.module.size() - 4, 4, "norm") == 0;
  if (isNorm) {
    Tensor t(DType::F32, p.shape);
    std::fill_n(t.mutableData<float>(), t.numel(), 1.0f);
    return t;
  }
  if (isStackedKey(p.hfKey)) {
    // Each expert drawn under its own HF key, as a per-expert model would be.
    std::vector<Tensor> members;
    Shape member(p.shape.begin() + 1, p.shape.end());
    for (int64_t i = 0; i < p.shape[0]; ++i)
      members.push_back(drawNormal(stackMemberKey(p.hfKey, i), member, seed));
    return stackTensors(members);
  }
  return drawNormal(p.hfKey, p.shape, seed);
}

TensorMap initialParameters(const Qwen3Config &model, uint64_t seed) {
  TensorMap params;
  for (const Qwen3Parameter &p : qwen3Parameters(model))
    params.emplace(p.hfKey, initialParameter(p, seed));
  return params;
}

namespace {
int64_t rssPeakBytes() {
  struct rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  return int64_t(usage.ru_maxrss) * 1024;
}

Tensor scalarStep(int64_t value) {
  Tensor t(DType::I64, {});
  *t.mutableData<int64_t>() = value;
  return t;
}
} // namespace

namespace {
/// What every rank of a run must share before its first collective: the
/// resolved run config (command-line overrides and a token file's shape
/// applied), the model's config.json, the layout and the checkpoint resumed.
RunSettings runSettings(const TrainConfig &config, const Qwen3Config &model,
                        const ParallelLayout &layout, const std::string &resumeDir) {
  RunSettings settings;
  settings.add("", config.toJson());
  settings.add("config.json", nlohmann::json::parse(model.toHfConfigJson()));
  std::string grid;
  for (size_t i = 0; i < layout.axisNames().size(); ++i)
    grid += fmt::format("{}{} {}", i ? " x " : "", layout.axisNames()[i], layout.shape()[i]);
  settings.add("layout", grid);
  settings.add("resumed from", resumeDir.empty() ? nlohmann::json(nullptr)
                                                 : nlohmann::json(resumeDir));
  return settings;
}

/// Where a run's first weights come from: a checkpoint (the one resumed,
/// else checkpoint.initial_load_path), else drawn (training.seed).
struct InitialWeights {
  std::optional<Checkpoint> checkpoint;
  std::map<std::string, Qwen3Parameter> drawn;
  uint64_t seed = 0;

  InitialWeights(const TrainConfig &config, const Qwen3Config &model,
                 const std::string &resumeDir) {
    const std::string &load = resumeDir.empty() ? config.checkpoint.initialLoadPath : resumeDir;
    if (resumeDir.empty() && !load.empty() && !config.checkpoint.initialLoadInHf)
      fail("checkpoint.initial_load_path: Kiln reads Hugging Face checkpoints only; set "
           "checkpoint.initial_load_in_hf=true");
    seed = uint64_t(config.training.seed);
    if (!load.empty())
      checkpoint = Checkpoint::open(load);
    else
      for (Qwen3Parameter &p : qwen3Parameters(model))
        drawn.emplace(p.hfKey, std::move(p));
  }
  /// Parameter `key` of `type`, or `slice` of it.
  Tensor get(const std::string &key, Type type, llvm::function_ref<Tensor(Tensor)> slice) const {
    return checkpoint ? bindParameter(*checkpoint, key, type, "@train_step", slice)
                      : slice(initialParameter(drawn.at(key), seed));
  }
};

} // namespace

ParallelLayout resolveRunLayout(TrainConfig &config, const Qwen3Config &model,
                                int64_t launchedWorld) {
  // A fixed token file holds the global batch: unless the run sets them, the
  // sequence length and the per-data-parallel-rank batch come from its shape.
  std::optional<Tensor> tokens;
  if (config.data.source == "tokens" && !config.data.tokensFile.empty() &&
      !(config.explicitKeys.count("training.seq_len") &&
        config.explicitKeys.count("training.local_batch_size"))) {
    tokens = readTokenBatch(config.data.tokensFile);
    if (!config.explicitKeys.count("training.seq_len") && !config.explicitKeys.count("data.seq_len"))
      config.training.seqLen = tokens->dim(1) - 1;
  }
  ParallelLayout layout =
      ParallelLayout::resolve(config.parallelism, model, config.training.seqLen, launchedWorld);
  // With global_batch_size set the file's rows are checked against it.
  if (tokens && !config.explicitKeys.count("training.local_batch_size") &&
      config.training.globalBatchSize == -1)
    config.training.localBatchSize =
        layout.batchRows(tokens->dim(0), 0, config.data.tokensFile).second;
  return layout;
}

Trainer::Trainer(const TrainConfig &given, const std::string &resumeDir) : config_(given) {
  const TrainConfig &config = config_;
  config.refusePlanOnly("train");
  model_ = config.model.resolve();
  MpiWorld &world = MpiWorld::get();
  layout_ = resolveRunLayout(config_, model_, world.size());
  // Before the grid's first collective: ranks that resolved different runs
  // would meet in collectives of different shapes.
  requireRanksAgree(runSettings(config_, model_, layout_, resumeDir), "the run");
  if (layout_.worldSize() > 1) {
    grid_ = std::make_unique<DeviceGrid>(layout_.axisNames(), layout_.shape());
    execution_.grid = grid_.get();
    execution_.rank = world.rank();
    execution_.worldSize = world.size();
    // Ranks on one machine share its cores.
    execution_.threads = std::max(1, int(std::thread::hardware_concurrency()) / world.localSize());
  }
  if (layout_.pp > 1) {
    startPipelined(resumeDir);
    return;
  }
  // The captured step takes the global batch; kiln-partition splits it.
  // The kernels run here: their constraints are the CPU's unless the run
  // names a target (to hold a CPU run to trn2's).
  pipeline_ = pipelineOptions(config, model_, &layout_, PrecisionDtype::Float32, TargetName::Cpu);
  pipeline_->log = execution_.rank == 0;
  module_ = captureTrainingStep(context_, model_, {microbatchSize(), config.training.seqLen},
                                *pipeline_);
  loss_ = module_->lookupSymbol<func::FuncOp>("loss");
  lossGrad_ = module_->lookupSymbol<func::FuncOp>("loss_grad");
  trainStep_ = module_->lookupSymbol<func::FuncOp>("train_step");
  succeedOrFail(context_, "@train_step of " + model_.name, [&] {
    FailureOr<TrainStepSignature> sig = TrainStepSignature::get(trainStep_);
    if (succeeded(sig))
      signature_ = std::move(*sig);
    return LogicalResult(sig);
  });

  if (!config.compile.artifact.empty() && !config.compile.enable)
    fail("compile.artifact: '{}' is a compiled step, which only compiled mode runs; set "
         "compile.enable=true too",
         config.compile.artifact);
  if (config.compile.enable)
    compileStep();

  // Refuse before allocating anything if the plan cannot fit in this
  // machine's memory (the plan is exact for the executor's live tensors;
  // ranks on one machine share it).
  int64_t peak = planMemory(trainStep_).peakBytes * (grid_ ? world.localSize() : 1);
  int64_t physical = int64_t(::sysconf(_SC_PHYS_PAGES)) * int64_t(::sysconf(_SC_PAGE_SIZE));
  if (peak > physical)
    fail("{}: a training step needs {:.1f} GB at its peak (memory plan{}), more than this "
         "machine's {:.1f} GB; use a smaller model, training.local_batch_size or "
         "training.seq_len",
         model_.name, peak / 1e9, grid_ ? ", all ranks on this machine" : "", physical / 1e9);

  // A resumed run continues from its checkpoint's weights; the initial ones
  // only start a run.
  InitialWeights weights(config, model_, resumeDir);
  if (weights.checkpoint)
    checkAllTensorsUsed(*weights.checkpoint, loss_);

  // State by argument index, each rank holding its slice of every tensor
  // (random weights are drawn whole, one tensor at a time, so every layout
  // starts from the same ones); the inputs' slots stay empty between steps.
  Signature global = *Signature::get(loss_);
  state_.resize(trainStep_.getNumArguments());
  argShardings_.resize(trainStep_.getNumArguments());
  for (unsigned arg = 0, e = trainStep_.getNumArguments(); arg < e; ++arg)
    argShardings_[arg] = argSharding(trainStep_, arg);
  for (const TrainStepSignature::Param &p : signature_.params) {
    Type type = loss_.getArgumentTypes()[*global.argument(kParamAttr, p.key)];
    auto slice = [&](Tensor full) { return localSlice(std::move(full), p.arg); };
    ArrayRef<int64_t> globalShape = cast<RankedTensorType>(type).getShape();
    // The moments are split as their parameter is.
    for (unsigned arg : {p.arg, p.expAvgArg, p.expAvgSqArg})
      globalShapes_[arg] = Shape(globalShape.begin(), globalShape.end());
    state_[p.arg] = weights.get(p.key, type, slice);
    Shape local = state_[p.arg].shape();
    state_[p.expAvgArg] = Tensor(DType::F32, local);
    state_[p.expAvgSqArg] = Tensor(DType::F32, local);
  }
  state_[signature_.stepArg] = scalarStep(0);
  for (const TrainStepSignature::OtherState &other : signature_.otherState) {
    ArrayRef<int64_t> shape = cast<RankedTensorType>(trainStep_.getArgumentTypes()[other.arg]).getShape();
    globalShapes_[other.arg] = Shape(shape.begin(), shape.end());
    state_[other.arg] = localSlice(Tensor(DType::F32, globalShapes_[other.arg]), other.arg);
  }
}

void Trainer::startPipelined(const std::string &resumeDir) {
  const TrainConfig &c = config_;
  // What a pipelined run does not do yet, by option.
  auto refuse = [&](bool set, const std::string &what) {
    if (set)
      fail("parallelism.pipeline_parallel_degree={} with {}: not built yet (kiln train runs "
           "pipeline stages eagerly, without it)",
           layout_.pp, what);
  };
  refuse(c.compile.enable, "compile.enable");
  // The stage functions take one microbatch of the local batch; the
  // schedule runs them. With FSDP, TP or EP inside a stage they are partitioned for
  // the run's layout without its pipeline axis.
  ParallelLayout inner = layout_;
  inner.pp = 1;
  pipeline_ = pipelineOptions(c, model_, inner.worldSize() > 1 ? &inner : nullptr,
                              PrecisionDtype::Float32, TargetName::Cpu);
  pipeline_->log = execution_.rank == 0;
  InitialWeights weights(c, model_, resumeDir);
  pipelined_ = std::make_unique<PipelineTraining>(
      model_, layout_, c.training.localBatchSize, microbatches(), c.training.seqLen, *pipeline_,
      *grid_, 0, [&](const std::string &key, Type type, llvm::function_ref<Tensor(Tensor)> slice) {
        return weights.get(key, type, slice);
      });
  loss_ = pipelined_->module().lookupSymbol<func::FuncOp>("loss");
  if (weights.checkpoint)
    checkAllTensorsUsed(*weights.checkpoint, loss_);
}

mlir::ModuleOp Trainer::module() { return pipelined_ ? pipelined_->module() : *module_; }

double Trainer::peakFlops() {
  if (peakFlops_ == 0)
    peakFlops_ = measureMachine();
  return peakFlops_;
}

double Trainer::measureMachine() {
  if (!grid_)
    return cpuRates().sgemmFlops;
  // One rank per machine measures it with every core while the others wait
  // (ranks probing side by side would each see a share of a disturbed
  // machine); the others adopt its figures. The largest over the machines
  // stands for all of them.
  Tensor rates(DType::F32, {2});
  float *data = rates.mutableData<float>();
  data[0] = data[1] = 0;
  if (MpiWorld::get().localRank() == 0) {
    CpuRates measured = cpuRates();
    data[0] = float(measured.sgemmFlops);
    data[1] = float(measured.memoryBandwidth);
  }
  MpiWorld::get().idleBarrier();
  rates = grid_->allReduce(std::move(rates), grid_->allAxes(), Reduction::Max);
  adoptCpuRates({rates.data<float>()[0], rates.data<float>()[1]});
  return cpuRates().sgemmFlops;
}

MemoryPlan Trainer::singleRankPlan() const {
  MLIRContext context;
  std::unique_ptr<KilnPipelineOptions> whole =
      pipelineOptions(config_, model_, nullptr, PrecisionDtype::Float32, TargetName::Cpu);
  whole->log = false;
  OwningOpRef<ModuleOp> module =
      captureTrainingStep(context, model_, {microbatchSize(), config_.training.seqLen}, *whole);
  return planMemory(module->lookupSymbol<func::FuncOp>("train_step"));
}

int64_t Trainer::microbatchSize() const {
  return config_.training.localBatchSize * layout_.dataParallelDegree();
}

int64_t Trainer::microbatches() const {
  return config_.training.microbatches(layout_.dataParallelDegree());
}

int64_t Trainer::globalBatchSize() const {
  return config_.training.globalBatch(layout_.dataParallelDegree());
}

Tensor Trainer::localSlice(Tensor full, unsigned arg) const {
  const std::optional<Sharding> &s = argShardings_[arg];
  return s && grid_ ? rankSlice(*grid_, *s, std::move(full)) : full;
}

Tensor Trainer::localInput(Tensor full, unsigned arg) const {
  return localSlice(laidOutSequence(std::move(full), layout_.sequenceLayout()), arg);
}

Tensor Trainer::gathered(Tensor local, unsigned arg) const {
  const std::optional<Sharding> &s = argShardings_[arg];
  return s && grid_ ? wholeFromSlices(*grid_, *s, std::move(local), globalShapes_.at(arg)) : local;
}

bool Trainer::anyRank(bool value) const {
  if (!grid_)
    return value;
  Tensor flag(DType::I64, {});
  *flag.mutableData<int64_t>() = value;
  return *grid_->allReduce(flag, grid_->allAxes(), Reduction::Max).data<int64_t>() != 0;
}

void Trainer::checkTokens(const Tensor &tokens) const {
  int64_t batch = globalBatchSize(), seq = config_.training.seqLen;
  if (tokens.rank() != 2 || tokens.dim(0) != batch || tokens.dim(1) != seq + 1)
    fail("token batch {} does not match training.local_batch_size={}{}{} and "
         "training.seq_len={} (expected [{}, {}])",
         shapeToString(tokens.shape()), config_.training.localBatchSize,
         layout_.dataParallelDegree() > 1
             ? fmt::format(" x data-parallel degree {}", layout_.dataParallelDegree())
             : "",
         microbatches() > 1 ? fmt::format(" x {} microbatches", microbatches()) : "", seq,
         batch, seq + 1);
  // The eager kernels refuse an id outside the vocabulary; compiled code
  // follows XLA, whose gather clamps it and whose one-hot misses it.
  if (compiled_) {
    Tensor ids = tokens.to(DType::I64);
    for (int64_t i = 0; i < ids.numel(); ++i) {
      int64_t id = ids.data<int64_t>()[i];
      if (id < 0 || id >= model_.vocabSize)
        fail("token id {} at [{}, {}] of the batch is outside the vocabulary [0, {})", id,
             i / tokens.dim(1), i % tokens.dim(1), model_.vocabSize);
    }
  }
}

double Trainer::flopsPerToken() const {
  return torchtitanFlopsPerToken(model_, config_.training.seqLen);
}

Trainer::~Trainer() = default;

void Trainer::compileStep() {
  // The Trainer's own pipeline runs are done by now.
  OwningOpRef<ModuleOp> step = lowerToHloStep(*module_, *pipeline_, model_.name);
  const std::string &artifact = config_.compile.artifact;
  if (!artifact.empty())
    compiled_ = std::make_unique<CompiledStep>(linkCpuArtifact(
        artifact, cpuStepIdentity(config_, model_, layout_, *pipeline_, *step), *step,
        grid_.get()));
  else
    compiled_ = std::make_unique<CompiledStep>(
        compileHloStep(*step, "the training step of " + model_.name, grid_.get()));
  compiled_->failCollectiveOnRank = config_.debug.failCollectiveOnRank;
  // The HLO step takes @train_step's arguments and then the rank, and
  // returns @train_step's results.
  const FunctionSignature &hlo = compiled_->function->signature();
  FunctionSignature kiln = FunctionSignature::of(trainStep_);
  if (hlo.arguments.size() != kiln.arguments.size() + 1 ||
      hlo.results.size() != kiln.results.size())
    fail("compile.enable: the HLO step of {} takes {} arguments and returns {} results, where "
         "@train_step takes {} (and the rank) and returns {}",
         model_.name, hlo.arguments.size(), hlo.results.size(), kiln.arguments.size(),
         kiln.results.size());
  for (const TensorSignature &r : kiln.results)
    resultDTypes_.push_back(r.dtype);
}

std::pair<double, double> Trainer::compileSeconds() const {
  if (!compiled_)
    return {0, 0};
  return {compiled_->lowerSeconds, compiled_->function->compileSeconds()};
}

std::vector<Tensor> Trainer::runCompiled(std::vector<Tensor> &args) const {
  const std::vector<TensorSignature> &params = compiled_->function->signature().arguments;
  // The state goes to the step as it is (its buffers are donated); a
  // converted input is a copy, the original kept.
  std::vector<Tensor> inputs;
  std::vector<bool> moved;
  for (size_t i = 0; i < args.size(); ++i) {
    moved.push_back(args[i].dtype() == params[i].dtype);
    inputs.push_back(moved.back() ? std::move(args[i]) : args[i].to(params[i].dtype));
  }
  // The rank (the evaluator feeds each its id the same way).
  Tensor rank(params.back().dtype, {});
  if (rank.dtype() == DType::I64)
    *rank.mutableData<int64_t>() = execution_.rank;
  else
    *rank.mutableData<int32_t>() = int32_t(execution_.rank);
  inputs.push_back(std::move(rank));
  // What the step did not take goes back, however it ends.
  struct GiveBack {
    std::vector<Tensor> &inputs, &args;
    const std::vector<bool> &moved;
    ~GiveBack() {
      for (size_t i = 0; i < args.size(); ++i)
        if (moved[i])
          args[i] = std::move(inputs[i]);
    }
  } giveBack{inputs, args, moved};
  std::vector<Tensor> results = compiled_->donating(inputs);
  for (size_t i = 0; i < results.size(); ++i)
    if (results[i].dtype() != resultDTypes_[i])
      results[i] = results[i].to(resultDTypes_[i]);
  return results;
}

StepMetrics Trainer::step(const Tensor &tokens) {
  checkState();
  checkTokens(tokens);
  if (pipelined_)
    return pipelinedStep(tokens);
  std::vector<Tensor> args = std::move(state_);
  state_.clear();
  bindInputs(signature_.inputs, splitMicrobatches(tokens, microbatches()), args);
  for (const Signature::Slot &input : signature_.inputs)
    args[input.index] = localInput(std::move(args[input.index]), input.index);
  ExecutionStats stats;
  stats.timeOps = timeOps_;
  std::map<std::string, int64_t> sentBefore = grid_ ? grid_->bytesSent()
                                                    : std::map<std::string, int64_t>();
  auto start = std::chrono::steady_clock::now();
  std::vector<Tensor> results;
  try {
    std::vector<Tensor> unused;
    try {
      if (compiled_)
        results = runCompiled(args); // takes the state it updates in place
      else
        results = runFunction(trainStep_, std::move(args), &stats, execution_, &unused);
    } catch (const Error &) {
      if (compiled_)
        unused = std::move(args);
      // The step failed before its first update if every piece of state is
      // intact: keep it, so the run can go on or be saved.
      bool intact = true;
      for (const TrainStepSignature::Param &p : signature_.params)
        intact &= unused[p.arg].defined() && unused[p.expAvgArg].defined() &&
                  unused[p.expAvgSqArg].defined();
      intact &= unused[signature_.stepArg].defined();
      for (const TrainStepSignature::OtherState &other : signature_.otherState)
        intact &= unused[other.arg].defined();
      if (intact) {
        for (const Signature::Slot &input : signature_.inputs)
          unused[input.index] = Tensor();
        state_ = std::move(unused);
      }
      throw;
    }
  } catch (const Error &e) {
    if (state_.empty())
      markStateLost(e.what());
    throw;
  }
  std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;

  StepMetrics m;
  m.step = ++updates_;
  m.loss = *results[signature_.lossResult].data<float>();
  m.gradNorm = *results[signature_.gradNormResult].data<float>();
  for (const Signature::Slot &metric : signature_.metrics)
    m.metrics.emplace_back(metric.name, *results[metric.index].data<float>());
  m.lr = learningRateAt(*pipeline_, updates_ - 1);
  state_.resize(trainStep_.getNumArguments());
  for (const TrainStepSignature::Param &p : signature_.params) {
    state_[p.arg] = std::move(results[p.result]);
    state_[p.expAvgArg] = std::move(results[p.expAvgResult]);
    state_[p.expAvgSqArg] = std::move(results[p.expAvgSqResult]);
  }
  state_[signature_.stepArg] = std::move(results[signature_.stepResult]);
  for (const TrainStepSignature::OtherState &other : signature_.otherState)
    state_[other.arg] = std::move(results[other.result]);
  m.memLivePeakBytes = compiled_ ? compiled_->function->lastPeakLiveBytes() : stats.peakLiveBytes;
  m.collectiveSeconds = stats.collectiveSeconds;
  m.opSeconds = std::move(stats.opSeconds);
  finishMetrics(m, tokens, elapsed.count(), sentBefore);
  return m;
}

StepMetrics Trainer::pipelinedStep(const Tensor &tokens) {
  std::map<std::string, int64_t> sentBefore = grid_->bytesSent();
  auto start = std::chrono::steady_clock::now();
  PipelineTraining::StepResult r;
  try {
    r = pipelined_->step(tokens);
  } catch (const Error &e) {
    // The update runs last and in place: only its own failure can take the
    // state with it.
    if (pipelined_->stateLost())
      markStateLost(e.what());
    throw;
  }
  std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
  StepMetrics m;
  m.step = ++updates_;
  m.loss = r.loss;
  m.gradNorm = r.gradNorm;
  m.lr = learningRateAt(*pipeline_, updates_ - 1);
  m.memLivePeakBytes = -1; // the stage functions' executor does not count them yet
  finishMetrics(m, tokens, elapsed.count(), sentBefore);
  return m;
}

void Trainer::finishMetrics(StepMetrics &m, const Tensor &tokens, double seconds,
                            const std::map<std::string, int64_t> &sentBefore) {
  m.seconds = seconds;
  double tokensPerStep = double(tokens.dim(0)) * double(tokens.dim(1) - 1);
  m.tokensPerSecond = tokensPerStep / m.seconds;
  m.tflops = flopsPerToken() * m.tokensPerSecond / 1e12;
  m.mfu = m.tflops * 1e12 / peakFlops();
  if (grid_)
    for (const auto &[axes, bytes] : grid_->bytesSent())
      if (auto before = sentBefore.find(axes);
          before == sentBefore.end() || bytes > before->second) // the step's, not bookkeeping
        m.bytesSent[axes] = bytes - (before == sentBefore.end() ? 0 : before->second);
  if (grid_) { // the largest rank's
    Tensor peak(DType::I64, {});
    *peak.mutableData<int64_t>() = m.memLivePeakBytes;
    m.memLivePeakBytes = *grid_->allReduce(peak, grid_->allAxes(), Reduction::Max).data<int64_t>();
  }
  m.rssPeakBytes = rssPeakBytes();
}

void Trainer::bindInputs(ArrayRef<Signature::Slot> inputs,
                         ArrayRef<InputsAndLabels> microbatches, std::vector<Tensor> &args) {
  for (const Signature::Slot &input : inputs) {
    const InputsAndLabels &split = microbatches[input.microbatch];
    if (input.name == kInputIdsInput)
      args[input.index] = split.inputIds;
    else if (input.name == kLabelsInput)
      args[input.index] = split.labels;
    else
      fail("the captured step takes an input '{}' that token batches do not provide",
           input.name);
  }
}

void Trainer::markStateLost(const std::string &why) {
  lostState_ =
      fmt::format("step {} failed after updating the weights in place: {}", updates_ + 1, why);
}

void Trainer::checkState() const {
  if (!lostState_.empty())
    fail("the training state is gone: {}", lostState_);
}

std::vector<Tensor> Trainer::argumentsOf(func::FuncOp fn, const TensorMap &params,
                                         const InputsAndLabels &microbatch) const {
  Signature sig = *Signature::get(fn);
  std::vector<Tensor> args(fn.getNumArguments());
  for (const Signature::Slot &p : sig.params())
    args[p.index] = params.at(p.name);
  bindInputs(sig.inputs(), microbatch, args);
  return args;
}

std::vector<InputsAndLabels> Trainer::microbatchesOf(const Tensor &tokens) const {
  checkTokens(tokens);
  return splitMicrobatches(tokens, microbatches());
}

double Trainer::evaluate(const Tensor &tokens) { return evaluate(std::vector<Tensor>{tokens}); }

func::FuncOp Trainer::rankLoss() {
  if (rankLoss_ || layout_.worldSize() == 1)
    return rankLoss_;
  // Built at the first validation: runs without one never pay for it.
  rankLossModule_ = partitionLoss(*module_, *pipeline_);
  rankLoss_ = rankLossModule_->lookupSymbol<func::FuncOp>("loss");
  // Validation binds the step's slices: both must store them alike.
  Signature sig = *Signature::get(rankLoss_);
  for (const TrainStepSignature::Param &p : signature_.params)
    if (rankLoss_.getArgAttr(*sig.argument(kParamAttr, p.key), kShardingAttr) !=
        trainStep_.getArgAttr(p.arg, kShardingAttr))
      fail("the per-rank @loss stores parameter '{}' unlike @train_step", p.key);
  return rankLoss_;
}

// @loss takes one microbatch: a batch's loss is the mean of its
// microbatches' (each has as many positions).
double Trainer::evaluate(const std::vector<Tensor> &batches) {
  if (pipelined_) {
    checkState();
    for (const Tensor &tokens : batches)
      checkTokens(tokens);
    return pipelined_->evaluate(batches);
  }
  double sum = 0;
  double count = double(batches.size() * microbatches());
  if (!rankLoss()) {
    TensorMap params = parameterState();
    for (const Tensor &tokens : batches)
      for (const InputsAndLabels &microbatch : microbatchesOf(tokens))
        sum += *runFunction(loss_, argumentsOf(loss_, params, microbatch)).at(0).data<float>();
    return sum / count;
  }
  // This rank's slices of the weights (stored as @train_step stores them)
  // and its rows of each batch (split as @train_step's inputs are).
  checkState();
  Signature sig = *Signature::get(rankLoss_);
  std::vector<Tensor> args(rankLoss_.getNumArguments());
  for (const TrainStepSignature::Param &p : signature_.params)
    args[*sig.argument(kParamAttr, p.key)] = state_[p.arg];
  // Each microbatch is split as @train_step's microbatch-0 inputs are.
  SmallVector<Signature::Slot> firstInputs;
  llvm::copy_if(signature_.inputs, std::back_inserter(firstInputs),
                [](const Signature::Slot &input) { return input.microbatch == 0; });
  std::vector<Tensor> inputs(trainStep_.getNumArguments());
  for (const Tensor &tokens : batches)
    for (const InputsAndLabels &microbatch : microbatchesOf(tokens)) {
      bindInputs(firstInputs, microbatch, inputs);
      for (const Signature::Slot &input : firstInputs)
        args[*sig.argument(kInputAttr, input.name)] =
            localInput(std::move(inputs[input.index]), input.index);
      sum += *runFunction(rankLoss_, args, nullptr, execution_).at(0).data<float>();
    }
  return sum / count;
}

TensorMap Trainer::gradients(const Tensor &tokens) {
  if (pipelined_) {
    checkState();
    checkTokens(tokens);
    return unstackTensors(pipelined_->gradients(tokens));
  }
  // The mean of the microbatches' gradients, as a step accumulates them.
  TensorMap params = parameterState(), grads;
  std::vector<InputsAndLabels> parts = microbatchesOf(tokens);
  for (const InputsAndLabels &microbatch : parts) {
    std::vector<Tensor> results = runFunction(lossGrad_, argumentsOf(lossGrad_, params, microbatch));
    for (unsigned i = 0, e = lossGrad_.getNumResults(); i < e; ++i)
      if (auto key = lossGrad_.getResultAttrOfType<StringAttr>(i, kGradAttr)) {
        auto [it, first] = grads.emplace(key.str(), results[i]);
        if (!first)
          it->second = kernels::add(std::move(it->second), results[i]);
      }
  }
  if (parts.size() > 1)
    for (auto &[key, grad] : grads)
      for (float &g : llvm::MutableArrayRef(grad.mutableData<float>(), grad.numel()))
        g /= float(parts.size());
  return unstackTensors(grads);
}

TensorMap Trainer::parameterState() const {
  checkState();
  TensorMap params;
  for (const TrainStepSignature::Param &p : signature_.params)
    params.emplace(p.key, gathered(state_[p.arg], p.arg));
  return params;
}

TensorMap Trainer::parameters() const {
  return unstackTensors(pipelined_ ? pipelined_->gathered(false) : parameterState());
}

template <typename Fn> void Trainer::forEachOptimizerState(Fn fn) const {
  for (const TrainStepSignature::Param &p : signature_.params) {
    fn(expAvgName(p.key), p.expAvgArg);
    fn(expAvgSqName(p.key), p.expAvgSqArg);
  }
  for (const TrainStepSignature::OtherState &other : signature_.otherState)
    fn(other.name, other.arg);
}

TensorMap Trainer::optimizerState() const {
  checkState();
  if (pipelined_)
    return pipelined_->gathered(true);
  TensorMap state;
  forEachOptimizerState([&](const std::string &name, unsigned arg) {
    state.emplace(name, gathered(state_[arg], arg));
  });
  return state;
}

void checkOptimizerStateFile(const SafeTensorsFile &file, int64_t step,
                             const std::map<std::string, Shape> &expected) {
  if (step < 0)
    fail("{}: the update count must be >= 0, got {}", file.path(), step);
  for (const auto &[name, shape] : expected) {
    if (!file.contains(name))
      fail("{}: missing optimizer state '{}'", file.path(), name);
    Tensor stored = file.get(name);
    if (stored.dtype() != DType::F32 || stored.shape() != shape)
      fail("{}: optimizer state '{}' is {} {}, but this model needs F32 {}", file.path(), name,
           dtypeName(stored.dtype()), shapeToString(stored.shape()), shapeToString(shape));
  }
  for (const std::string &name : file.names())
    if (!expected.count(name))
      fail("{}: optimizer state '{}' belongs to no parameter of this model", file.path(), name);
}

void Trainer::restoreOptimizerState(const SafeTensorsFile &file, int64_t step) {
  checkState();
  if (pipelined_) {
    pipelined_->restoreOptimizerState(file, step);
    updates_ = step;
    return;
  }
  std::map<std::string, Shape> expected;
  forEachOptimizerState(
      [&](const std::string &name, unsigned arg) { expected[name] = globalShapes_.at(arg); });
  checkOptimizerStateFile(file, step, expected);
  std::vector<Tensor> restored = state_; // all or nothing: state_ changes only at the end
  forEachOptimizerState([&](const std::string &name, unsigned arg) {
    // An owned copy: the run must not depend on the file staying unchanged.
    restored[arg] = localSlice(file.get(name).to(DType::F32), arg);
  });
  restored[signature_.stepArg] = scalarStep(step);
  state_ = std::move(restored);
  updates_ = step;
}

} // namespace kiln
