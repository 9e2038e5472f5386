//===- CompiledStep.cpp - The hlo training step compiled for the CPU ------===//

#include "kiln/Driver/CompiledStep.h"
#include "kiln/CustomKernels/Registry.h"
#include "kiln/Dialect/Hlo/IR/HloOps.h"
#include "kiln/Driver/PipelineConfig.h"
#include "kiln/Passes/HloToLinalg/HostCalls.h"
#include "kiln/Pipeline/KilnPipeline.h"
#include "kiln/Support/Diagnostics.h"
#include "kiln/Support/Error.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/ExecutionEngine/CRunnerUtils.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <chrono>
#include <cstring>
#include <filesystem>

namespace kiln {
namespace {

/// LLVM's optimizer at -O2 on the outlined loop nests (kiln-outline-loops):
/// on configs/brown.json's step, 1.22 s per step against 1.57 s without it,
/// for 7.5 s of compile against 3.9 s (-O3: 1.18 s for 8.9 s).
constexpr int kOptLevel = 2;

/// Loop nests of this many innermost iterations and more run on the
/// host's OpenMP threads (an OpenMP fork and join costs microseconds, an
/// iteration about a nanosecond).
constexpr int64_t kParallelLoopWork = int64_t(1) << 15;

/// The step running on this thread, and the first error of one of its
/// kernels: exceptions must not unwind through the JIT's frames, so the
/// host function records the error and returns.
struct ActiveStep {
  const CompiledStep *step;
  std::string error;
};
thread_local ActiveStep *active = nullptr;

Tensor viewOf(const TensorSignature &signature, int64_t pointer) {
  return Tensor(signature.dtype, signature.shape, nullptr,
                reinterpret_cast<const void *>(pointer));
}

/// kiln_custom_call's C interface (kiln/Passes/HloToLinalg/HostCalls.h):
/// the operands' buffers, then the results' to write.
extern "C" void kilnCustomCall(int64_t site, StridedMemRefType<int64_t, 1> *pointers) {
  ActiveStep *running = active;
  if (!running || !running->error.empty())
    return;
  const CompiledKernelCall &kernel = running->step->kernelCalls.at(size_t(site));
  try {
    const int64_t *table = pointers->data + pointers->offset;
    std::vector<Tensor> operands;
    for (size_t i = 0; i < kernel.operands.size(); ++i)
      operands.push_back(viewOf(kernel.operands[i], table[i]));
    std::vector<Tensor> results = kernel.call.run(std::move(operands));
    if (results.size() != kernel.results.size())
      fail("{}: the kernel returned {} results, the call has {}", kernel.call.instruction,
           results.size(), kernel.results.size());
    for (size_t r = 0; r < results.size(); ++r) {
      const TensorSignature &want = kernel.results[r];
      Tensor result = results[r].dtype() == want.dtype ? results[r] : results[r].to(want.dtype);
      if (result.shape() != want.shape)
        fail("{}: result {} of the kernel is {}, the call's is {}", kernel.call.instruction, r,
             shapeToString(result.shape()), shapeToString(want.shape));
      std::memcpy(reinterpret_cast<void *>(table[kernel.operands.size() + r]),
                  result.rawData(), result.nbytes());
    }
  } catch (const std::exception &e) {
    running->error = kernel.call.instruction + ": " + e.what();
  }
}

/// kiln_collective's C interface (kiln/Passes/HloToLinalg/HostCalls.h): the
/// operand's buffer, then the result's to write.
extern "C" void kilnCollective(int64_t site, StridedMemRefType<int64_t, 1> *pointers) {
  ActiveStep *running = active;
  if (!running || !running->error.empty())
    return;
  const CompiledStep &step = *running->step;
  const CompiledCollective &collective = step.collectives.at(size_t(site));
  try {
    if (step.grid && step.grid->rank() == step.failCollectiveOnRank &&
        collective.kind != CompiledCollective::Kind::ReplicaId)
      fail("{}: debug.fail_collective_on_rank={} (an injected failure)", collective.where,
           step.failCollectiveOnRank);
    runCollective(collective, step.grid, pointers->data + pointers->offset);
  } catch (const std::exception &e) {
    running->error = e.what();
  }
}

} // namespace

std::vector<Tensor> CompiledStep::operator()(const std::vector<Tensor> &arguments) const {
  std::vector<Tensor> shared = arguments;
  return run(shared, /*donate=*/false);
}

std::vector<Tensor> CompiledStep::donating(std::vector<Tensor> &arguments) const {
  return run(arguments, /*donate=*/true);
}

std::vector<Tensor> CompiledStep::run(std::vector<Tensor> &arguments, bool donate) const {
  ActiveStep running{this, ""};
  // This step is the running one for the call (and only then), however it ends.
  struct Activation {
    ActiveStep *outer;
    explicit Activation(ActiveStep *step) : outer(active) { active = step; }
    ~Activation() { active = outer; }
  };
  std::vector<Tensor> results;
  {
    Activation activation(&running);
    results = donate ? function->donating(arguments) : (*function)(arguments);
  }
  if (!running.error.empty())
    fail("compiled mode: {}", running.error);
  return results;
}

mlir::OwningOpRef<mlir::ModuleOp> extractHloStep(mlir::ModuleOp module) {
  auto step = module.lookupSymbol<mlir::func::FuncOp>("train_step");
  mlir::OwningOpRef<mlir::ModuleOp> alone = mlir::ModuleOp::create(module.getLoc());
  alone->push_back(step.clone());
  return alone;
}

std::string printHloStep(mlir::ModuleOp module) {
  mlir::OwningOpRef<mlir::ModuleOp> alone = extractHloStep(module);
  std::string text;
  llvm::raw_string_ostream os(text);
  alone->print(os, mlir::OpPrintingFlags().enableDebugInfo(/*enable=*/true, /*prettyForm=*/false));
  return text;
}

mlir::OwningOpRef<mlir::ModuleOp> lowerToHloStep(mlir::ModuleOp captured,
                                                 KilnPipelineOptions &options,
                                                 const std::string &what) {
  mlir::OwningOpRef<mlir::ModuleOp> copy = captured.clone();
  // A CPU-only kernel (chunked_cross_entropy) is a custom call compiled mode
  // runs.
  options.cpuKernelCalls = true;
  runKilnPipeline(*copy, options, LoweringStage::Hlo, LoweringStage::PerRank,
                  "compiled mode: lowering @train_step of " + what + " to HLO failed");
  return extractHloStep(*copy);
}

namespace {

/// The signature of `hloStep`'s @train_step; `what` names the module when it
/// has none.
FunctionSignature stepSignature(mlir::ModuleOp hloStep, const std::string &what) {
  auto step = hloStep.lookupSymbol<mlir::func::FuncOp>("train_step");
  if (!step)
    fail("compiled mode: {} has no func.func @train_step", what);
  return FunctionSignature::of(step);
}

/// What the code of `hloStep`'s @train_step calls in the host: each custom
/// call's kernel and each collective bound to `grid`'s axes, by site, in
/// `compiled`; returns the step's signature.
FunctionSignature bindHostCalls(mlir::ModuleOp hloStep, const std::string &what,
                                DeviceGrid *grid, CompiledStep &compiled) {
  FunctionSignature signature = stepSignature(hloStep, what);
  registerCustomKernels();
  for (mlir::Operation *op : numberCustomCallSites(hloStep)) {
    auto call = mlir::cast<hlo::CustomCallOp>(op);
    std::string where = "the custom call at site " + std::to_string(compiled.kernelCalls.size());
    if (auto name = mlir::dyn_cast<mlir::NameLoc>(call.getLoc()))
      where = name.getName().str();
    CompiledKernelCall kernel{
        HloKernelCall::parse(where, call.getBackendConfig().str(), *call.getContext()), {}, {}};
    for (mlir::Value v : call.getInputs())
      kernel.operands.push_back(FunctionSignature::signatureOf(v.getType(), where));
    for (mlir::Value v : call.getResults())
      kernel.results.push_back(FunctionSignature::signatureOf(v.getType(), where));
    compiled.kernelCalls.push_back(std::move(kernel));
  }
  compiled.collectives = bindCollectives(hloStep, grid);
  compiled.grid = grid;
  return signature;
}

std::vector<std::pair<std::string, void *>> stepHostSymbols() {
  return {{"_mlir_ciface_" + kCustomCallFunction.str(), reinterpret_cast<void *>(&kilnCustomCall)},
          {"_mlir_ciface_" + kCollectiveFunction.str(),
           reinterpret_cast<void *>(&kilnCollective)}};
}

/// `hloStep` through the pipeline's Linalg and Llvm stages, then compiled;
/// the lowering's seconds since `start` go to `lowerSeconds`.
std::unique_ptr<CompiledFunction>
lowerAndCompile(mlir::ModuleOp hloStep, const std::string &what, FunctionSignature signature,
                bool keepObject, std::chrono::steady_clock::time_point start,
                double *lowerSeconds) {
  // Bufferization needs the upstream dialects' models on the module's context.
  mlir::DialectRegistry registry;
  registerCompiledModeInterfaces(registry);
  hloStep->getContext()->appendDialectRegistry(registry);
  KilnPipelineOptions options;
  options.hostAllocator = true;
  options.parallelLoopWork = kParallelLoopWork;
  runKilnPipeline(hloStep, options, LoweringStage::Llvm, LoweringStage::Hlo,
                  "compiled mode: lowering @train_step of " + what + " failed");
  if (lowerSeconds)
    *lowerSeconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return std::make_unique<CompiledFunction>(hloStep, "train_step", std::move(signature),
                                            stepHostSymbols(), kOptLevel, keepObject);
}

} // namespace

std::unique_ptr<CompiledFunction> compileHloStepCode(mlir::ModuleOp hloStep,
                                                     const std::string &what,
                                                     double *lowerSeconds) {
  auto start = std::chrono::steady_clock::now();
  return lowerAndCompile(hloStep, what, stepSignature(hloStep, what), /*keepObject=*/true, start,
                         lowerSeconds);
}

CompiledStep compileHloStep(mlir::ModuleOp hloStep, const std::string &what, DeviceGrid *grid) {
  auto start = std::chrono::steady_clock::now();
  CompiledStep compiled;
  FunctionSignature signature = bindHostCalls(hloStep, what, grid, compiled);
  compiled.function = lowerAndCompile(hloStep, what, std::move(signature),
                                      /*keepObject=*/false, start, &compiled.lowerSeconds);
  return compiled;
}

CompiledStep linkCompiledStep(mlir::ModuleOp hloStep, const std::string &objectPath,
                              std::vector<int64_t> outParamBuffers,
                              const std::vector<std::string> &parallelLoopNests,
                              const std::string &what, DeviceGrid *grid) {
  auto start = std::chrono::steady_clock::now();
  CompiledStep compiled;
  FunctionSignature signature = bindHostCalls(hloStep, what, grid, compiled);
  compiled.lowerSeconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  compiled.function = std::make_unique<CompiledFunction>(
      objectPath, "train_step", std::move(signature), std::move(outParamBuffers),
      parallelLoopNests, stepHostSymbols());
  return compiled;
}

CompiledStep compileHloStep(const std::string &path) {
  auto start = std::chrono::steady_clock::now();
  if (!std::filesystem::exists(path))
    fail("compiled mode: '{}' does not exist (kiln compile writes it beside model.hlo.pb; "
         "compile again with this version)",
         path);
  mlir::DialectRegistry registry;
  registry.insert<hlo::HloDialect, mlir::func::FuncDialect>();
  registerCompiledModeInterfaces(registry);
  auto context = std::make_unique<mlir::MLIRContext>(registry);
  mlir::OwningOpRef<mlir::ModuleOp> module;
  succeedOrFail(*context, "compiled mode: '" + path + "' is not an hlo module", [&] {
    module = mlir::parseSourceFile<mlir::ModuleOp>(path, context.get());
    return mlir::failure(!module);
  });
  CompiledStep compiled = compileHloStep(*module, "'" + path + "'");
  module = nullptr;
  compiled.context = std::move(context);
  compiled.lowerSeconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() -
      compiled.function->compileSeconds();
  return compiled;
}

} // namespace kiln
