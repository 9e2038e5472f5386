//===- Training.cpp - Capture and run whole training steps ----------------===//

#include "kiln/Driver/Training.h"
#include "kiln/Frontend/Qwen3Naming.h"
#include "kiln/Passes.h"
#include "kiln/Planner/MemoryPlan.h"
#include "kiln/Runtime/CpuPeak.h"
#include "kiln/Runtime/HfCheckpoint.h"
#include "kiln/Support/Error.h"

#include "mlir/Pass/PassManager.h"

#include <chrono>
#include <random>
#include <sys/resource.h>
#include <unistd.h>

using namespace mlir;

namespace kiln {

OptimizerSettings OptimizerSettings::fromConfig(const TrainConfig &c) {
  OptimizerSettings s;
  s.lr = c.optimizer.lr;
  s.beta1 = c.optimizer.betas[0];
  s.beta2 = c.optimizer.betas[1];
  s.eps = c.optimizer.eps;
  s.weightDecay = c.optimizer.weightDecay;
  s.maxNorm = c.training.maxNorm;
  s.phases = lrPhases(c.training.steps, c.lrScheduler.warmupSteps, c.lrScheduler.decayRatio);
  s.decayType = c.lrScheduler.decayType;
  s.minLrFactor = c.lrScheduler.minLrFactor;
  return s;
}

double OptimizerSettings::lrAt(int64_t step) const {
  return lr * lrFactor(step, phases, decayType, minLrFactor);
}

OwningOpRef<ModuleOp> captureTrainingStep(MLIRContext &context, const Qwen3Config &model,
                                          const CaptureOptions &shape,
                                          const OptimizerSettings &o) {
  OwningOpRef<ModuleOp> module = captureQwen3(context, model, shape);
  PassManager pm(&context);
  pm.addPass(createAutodiff());
  OptimizerOptions options;
  options.lr = o.lr;
  options.beta1 = o.beta1;
  options.beta2 = o.beta2;
  options.eps = o.eps;
  options.weightDecay = o.weightDecay;
  options.maxNorm = o.maxNorm;
  options.warmupSteps = o.phases.warmup;
  options.stableSteps = o.phases.stable;
  options.decaySteps = o.phases.decay;
  options.decayType = o.decayType;
  options.minLrFactor = o.minLrFactor;
  pm.addPass(createOptimizer(options));
  succeedOrFail(context, "building the training step of " + model.name + " failed",
                [&] { return pm.run(*module); });
  return module;
}

TensorMap initialParameters(const Qwen3Config &model, uint64_t seed) {
  TensorMap params;
  for (const Qwen3Parameter &p : qwen3Parameters(model)) {
    Tensor t(DType::F32, p.shape);
    float *data = t.mutableData<float>();
    bool isNorm = p.module.size() >= 4 && p.module.compare(p.module.size() - 4, 4, "norm") == 0;
    if (isNorm) {
      std::fill_n(data, t.numel(), 1.0f);
    } else {
      std::seed_seq seq(p.hfKey.begin(), p.hfKey.end());
      std::vector<uint32_t> words(2);
      seq.generate(words.begin(), words.end());
      std::mt19937_64 rng(seed ^ (uint64_t(words[0]) << 32 | words[1]));
      std::normal_distribution<float> normal(0.0f, 0.02f);
      for (int64_t i = 0; i < t.numel(); ++i)
        data[i] = normal(rng);
    }
    params.emplace(p.hfKey, std::move(t));
  }
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

Trainer::Trainer(const TrainConfig &config) : config_(config) {
  model_ = config.model.hfPath.empty() ? Qwen3Config::resolve(config.model.flavor)
                                       : Qwen3Config::fromHfDirectory(config.model.hfPath);
  optimizer_ = OptimizerSettings::fromConfig(config);
  module_ = captureTrainingStep(context_, model_,
                                {config.training.localBatchSize, config.training.seqLen},
                                optimizer_);
  loss_ = module_->lookupSymbol<func::FuncOp>("loss");
  lossGrad_ = module_->lookupSymbol<func::FuncOp>("loss_grad");
  trainStep_ = module_->lookupSymbol<func::FuncOp>("train_step");

  // Refuse before allocating anything if the plan cannot fit in this
  // machine's memory (the plan is exact for the executor's live tensors).
  int64_t peak = planMemory(trainStep_).peakBytes;
  int64_t physical = int64_t(::sysconf(_SC_PHYS_PAGES)) * int64_t(::sysconf(_SC_PAGE_SIZE));
  if (peak > physical)
    fail("{}: a training step needs {:.1f} GB at its peak (memory plan), more than this "
         "machine's {:.1f} GB; use a smaller model, training.local_batch_size or "
         "training.seq_len",
         model_.name, peak / 1e9, physical / 1e9);

  const std::string &load = config.checkpoint.initialLoadPath;
  if (!load.empty() && !config.checkpoint.initialLoadInHf)
    fail("checkpoint.initial_load_path: Kiln reads Hugging Face checkpoints only; set "
         "checkpoint.initial_load_in_hf=true");
  std::optional<Checkpoint> checkpoint;
  TensorMap drawn;
  if (!load.empty())
    checkpoint = Checkpoint::open(load);
  else
    drawn = initialParameters(model_, uint64_t(config.training.seed));

  for (unsigned i = 0, e = trainStep_.getNumArguments(); i < e; ++i)
    if (auto key = trainStep_.getArgAttrOfType<StringAttr>(i, kParamAttr)) {
      keys_.push_back(key.str());
      state_.push_back(checkpoint ? bindParameter(*checkpoint, key.str(),
                                                  trainStep_.getArgumentTypes()[i],
                                                  "@train_step")
                                  : drawn.at(key.str()));
    }
  drawn.clear();
  state_.push_back(scalarStep(0));
  for (int moment = 0; moment < 2; ++moment)
    for (size_t i = 0; i < keys_.size(); ++i)
      state_.push_back(Tensor(DType::F32, state_[i].shape()));
  peakFlops_ = measureCpuPeakFlops();
}

void Trainer::checkTokens(const Tensor &tokens) const {
  int64_t batch = config_.training.localBatchSize, seq = config_.training.seqLen;
  if (tokens.rank() != 2 || tokens.dim(0) != batch || tokens.dim(1) != seq + 1)
    fail("token batch {} does not match training.local_batch_size={} and "
         "training.seq_len={} (expected [{}, {}])",
         shapeToString(tokens.shape()), batch, seq, batch, seq + 1);
}

double Trainer::flopsPerToken() const {
  const Qwen3Config &m = model_;
  return 6.0 * double(m.matmulParameterCount()) +
         12.0 * double(m.numLayers * m.numHeads * m.headDim * config_.training.seqLen);
}

StepMetrics Trainer::step(const Tensor &tokens) {
  checkTokens(tokens);
  std::vector<Tensor> args = std::move(state_);
  state_.clear();
  args.push_back(tokens);
  ExecutionStats stats;
  auto start = std::chrono::steady_clock::now();
  std::vector<Tensor> results = runFunction(trainStep_, std::move(args), &stats);
  std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;

  size_t n = keys_.size();
  StepMetrics m;
  m.step = ++updates_;
  m.loss = *results[3 * n + 1].data<float>();
  m.gradNorm = *results[3 * n + 2].data<float>();
  m.lr = optimizer_.lrAt(updates_ - 1);
  results.resize(3 * n + 1);
  state_ = std::move(results);
  m.seconds = elapsed.count();
  double tokensPerStep = double(tokens.dim(0)) * double(tokens.dim(1) - 1);
  m.tokensPerSecond = tokensPerStep / m.seconds;
  m.tflops = flopsPerToken() * m.tokensPerSecond / 1e12;
  m.mfu = m.tflops * 1e12 / peakFlops_;
  m.memLivePeakBytes = stats.peakLiveBytes;
  m.rssPeakBytes = rssPeakBytes();
  return m;
}

std::vector<Tensor> Trainer::lossArguments(const Tensor &tokens) const {
  checkTokens(tokens);
  // @loss and @loss_grad take (tokens, params...) in the same parameter order.
  std::vector<Tensor> args{tokens};
  args.insert(args.end(), state_.begin(), state_.begin() + keys_.size());
  return args;
}

double Trainer::evaluate(const Tensor &tokens) {
  return *runFunction(loss_, lossArguments(tokens)).at(0).data<float>();
}

TensorMap Trainer::gradients(const Tensor &tokens) {
  std::vector<Tensor> results = runFunction(lossGrad_, lossArguments(tokens));
  TensorMap grads;
  for (unsigned i = 1, e = lossGrad_.getNumResults(); i < e; ++i)
    grads.emplace(lossGrad_.getResultAttrOfType<StringAttr>(i, kGradAttr).str(), results[i]);
  return grads;
}

TensorMap Trainer::parameters() const {
  TensorMap params;
  for (size_t i = 0; i < keys_.size(); ++i)
    params.emplace(keys_[i], state_[i]);
  return params;
}

void Trainer::saveHf(const std::string &dir, int64_t maxShardBytes) const {
  saveHfCheckpoint(dir, model_.toHfConfigJson(), parameters(), maxShardBytes);
}

} // namespace kiln
