//===- CompiledFunction.cpp - A lowered function JIT-compiled for the CPU -===//
//
// The lowered function takes each memref argument exploded into (allocated
// pointer, aligned pointer, offset, sizes..., strides...); the engine's
// packed wrapper `_mlir_<name>(void **)` takes a pointer to each of those
// scalars. A Kiln tensor is dense and row-major, so each argument is its
// data pointer twice, offset 0, its shape and its row-major strides.
//
//===----------------------------------------------------------------------===//

#include "kiln/Backend/Compiled/CompiledFunction.h"
#include "HostFunctions.h"
#include "kiln/Dialect/Kiln/IR/StateAliases.h"
#include "kiln/Dialect/Kiln/IR/KilnDialect.h"
#include "kiln/Passes/HloToLinalg/HostCalls.h"
#include "kiln/Support/Error.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/ExecutionEngine/CRunnerUtils.h"
#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"

#include "llvm/ExecutionEngine/Orc/ExecutionUtils.h"
#include "llvm/ExecutionEngine/Orc/LLJIT.h"
#include "llvm/ExecutionEngine/Orc/Mangling.h"
#include "llvm/ExecutionEngine/Orc/RTDyldObjectLinkingLayer.h"
#include "llvm/ExecutionEngine/SectionMemoryManager.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/TargetSelect.h"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <omp.h>

namespace kiln {

struct CompiledFunction::Engine {
  /// Code generated here (MLIR's JIT) or linked from an object file.
  std::unique_ptr<mlir::ExecutionEngine> engine;
  std::unique_ptr<llvm::orc::LLJIT> linked;
  void (*entry)(void **) = nullptr;
  /// The packed wrappers of the threaded loop nests, by site
  /// (the module's kiln.parallel_loops).
  std::vector<void (*)(void **)> parallelLoops;
};

namespace {

/// The arena of the function running on this thread: the lowered code's
/// allocations (finalize-memref-to-llvm's generic functions) go there.
thread_local StepArena *activeArena = nullptr;
/// The function running on this thread, whose loop nests kiln_parallel_for
/// runs.
thread_local const CompiledFunction::Engine *activeEngine = nullptr;

/// kiln_parallel_for's C interface (kiln/Passes/HloToLinalg/HostCalls.h):
/// the nest of `site` on each OpenMP thread's contiguous share of [lower,
/// upper). The nest only loads, stores and computes (kiln-outline-loops
/// threads no other), so the workers need neither the arena nor the step.
extern "C" void kilnParallelFor(int64_t site, int64_t lower, int64_t upper,
                                StridedMemRefType<int64_t, 1> *table) {
  void (*nest)(void **) = activeEngine->parallelLoops[size_t(site)];
  const int64_t *words = table->data + table->offset;
  int64_t count = table->sizes[0];
  int64_t total = upper - lower;
  int threads = int(std::min<int64_t>(omp_get_max_threads(), total));
  auto run = [&](int64_t from, int64_t to) {
    std::vector<int64_t> own(words, words + count);
    own.push_back(from);
    own.push_back(to);
    std::vector<void *> pointers;
    for (int64_t &w : own)
      pointers.push_back(&w);
    nest(pointers.data());
  };
  if (threads <= 1)
    return run(lower, upper);
#pragma omp parallel num_threads(threads)
  {
    int64_t t = omp_get_thread_num(), n = omp_get_num_threads();
    int64_t from = lower + total * t / n, to = lower + total * (t + 1) / n;
    if (from < to)
      run(from, to);
  }
}

extern "C" void *kilnAllocate(size_t bytes) {
  return activeArena ? activeArena->allocate(bytes, 1) : std::malloc(bytes);
}
extern "C" void *kilnAllocateAligned(size_t alignment, size_t bytes) {
  return activeArena ? activeArena->allocate(bytes, alignment)
                     : std::aligned_alloc(alignment, (bytes + alignment - 1) / alignment * alignment);
}
extern "C" void kilnRelease(void *pointer) {
  if (activeArena)
    activeArena->release(pointer);
  else
    std::free(pointer);
}

/// What every compiled function's code calls in the host, then the
/// caller's `hostSymbols`: memref.copy of a strided view calls MLIR's
/// runtime helper, a float32 matmul OpenBLAS (HostFunctions.h), an
/// allocation the step's arena, a threaded loop nest kiln_parallel_for.
llvm::orc::SymbolMap
hostSymbolMap(llvm::orc::MangleAndInterner &interner,
              const std::vector<std::pair<std::string, void *>> &hostSymbols) {
  llvm::orc::SymbolMap symbols;
  auto bind = [&](llvm::StringRef symbol, void *address) {
    symbols[interner(symbol)] = {llvm::orc::ExecutorAddr::fromPtr(address),
                                 llvm::JITSymbolFlags::Exported};
  };
  bind("memrefCopy", reinterpret_cast<void *>(&memrefCopy));
  bind("_mlir_ciface_kiln_sgemm", reinterpret_cast<void *>(&kilnSgemm));
  bind("_mlir_memref_to_llvm_alloc", reinterpret_cast<void *>(&kilnAllocate));
  bind("_mlir_memref_to_llvm_aligned_alloc", reinterpret_cast<void *>(&kilnAllocateAligned));
  bind("_mlir_memref_to_llvm_free", reinterpret_cast<void *>(&kilnRelease));
  bind("_mlir_ciface_kiln_parallel_for", reinterpret_cast<void *>(&kilnParallelFor));
  for (const auto &[symbol, address] : hostSymbols)
    bind(symbol, address);
  return symbols;
}

void initializeNativeTarget() {
  static std::once_flag targets;
  std::call_once(targets, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
  });
}

} // namespace

TensorSignature FunctionSignature::signatureOf(mlir::Type type, const std::string &what) {
  auto tensor = mlir::dyn_cast<mlir::RankedTensorType>(type);
  if (!tensor)
    fail("compiled mode: {} is not a ranked tensor", what);
  mlir::Type element = tensor.getElementType();
  DType dtype;
  if (element.isF32())
    dtype = DType::F32;
  else if (element.isBF16())
    dtype = DType::BF16;
  else if (element.isF16())
    dtype = DType::F16;
  else if (element.isInteger(64))
    dtype = DType::I64;
  else if (element.isInteger(32))
    dtype = DType::I32;
  else
    fail("compiled mode: {} has element type {}, which a Kiln tensor cannot hold", what,
         [&] {
           std::string s;
           llvm::raw_string_ostream os(s);
           element.print(os);
           return s;
         }());
  return {dtype, Shape(tensor.getShape().begin(), tensor.getShape().end())};
}

namespace {

std::string describe(const TensorSignature &s) {
  return std::string(dtypeName(s.dtype)) + shapeToString(s.shape);
}

} // namespace

FunctionSignature FunctionSignature::of(mlir::func::FuncOp func) {
  FunctionSignature signature;
  for (auto [i, type] : llvm::enumerate(func.getArgumentTypes()))
    signature.arguments.push_back(
        signatureOf(type, "argument " + std::to_string(i) + " of @" + func.getName().str()));
  for (auto [i, type] : llvm::enumerate(func.getResultTypes()))
    signature.results.push_back(
        signatureOf(type, "result " + std::to_string(i) + " of @" + func.getName().str()));
  return signature;
}

CompiledFunction::CompiledFunction(
    mlir::ModuleOp llvmModule, const std::string &name, FunctionSignature signature,
    const std::vector<std::pair<std::string, void *>> &hostSymbols, int optLevel,
    bool keepObject)
    : engine_(std::make_unique<Engine>()), arena_(std::make_unique<StepArena>()), name_(name),
      signature_(std::move(signature)) {
  auto start = std::chrono::steady_clock::now();
  initializeNativeTarget();
  mlir::DialectRegistry registry;
  mlir::registerBuiltinDialectTranslation(registry);
  mlir::registerLLVMDialectTranslation(registry);
  llvmModule->getContext()->appendDialectRegistry(registry);

  // Held by name: the option is a function_ref.
  // LLVM's mid-level optimizer is superlinear in a function's size: on a
  // whole step as one function (the qwen3 fixture) -O3 took 45 s against 4 s
  // for code generation alone; the caller asks for it on code whose loop
  // nests are functions of their own (kiln-outline-loops).
  std::function<llvm::Error(llvm::Module *)> optimize =
      mlir::makeOptimizingTransformer(optLevel, /*sizeLevel=*/0, nullptr);
  mlir::ExecutionEngineOptions options;
  options.transformer = optimize;
  options.jitCodeGenOptLevel =
      optLevel >= 3 ? llvm::CodeGenOptLevel::Aggressive : llvm::CodeGenOptLevel::Default;
  // The engine's object cache keeps the one object the module compiles to.
  options.enableObjectDump = keepObject;
  auto created = mlir::ExecutionEngine::create(llvmModule, options);
  if (!created)
    fail("compiled mode: @{} does not compile: {}", name,
         llvm::toString(created.takeError()));
  engine_->engine = std::move(*created);
  engine_->engine->registerSymbols([&](llvm::orc::MangleAndInterner interner) {
    return hostSymbolMap(interner, hostSymbols);
  });
  engine_->engine->initialize();
  if (auto loops = llvmModule->getAttrOfType<mlir::ArrayAttr>(kParallelLoopsAttr))
    for (auto symbol : loops.getAsRange<mlir::FlatSymbolRefAttr>())
      parallelLoopNames_.push_back(symbol.getValue().str());
  // Code is generated at the first lookup: here, so that it is timed here.
  bind([&](const std::string &function) { return engine_->engine->lookupPacked(function); },
       "@" + name);
  if (auto func = llvmModule.lookupSymbol<mlir::LLVM::LLVMFuncOp>(name))
    if (auto shared = func->getAttrOfType<mlir::DenseI64ArrayAttr>(kOutParamBuffersAttr))
      outParamBuffers_.assign(shared.asArrayRef().begin(), shared.asArrayRef().end());
  returnFreedMemoryToSystem(); // LLVM's temporaries
  compileSeconds_ =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

CompiledFunction::CompiledFunction(
    const std::string &objectPath, const std::string &name, FunctionSignature signature,
    std::vector<int64_t> outParamBuffers, const std::vector<std::string> &parallelLoopNests,
    const std::vector<std::pair<std::string, void *>> &hostSymbols)
    : engine_(std::make_unique<Engine>()), arena_(std::make_unique<StepArena>()), name_(name),
      signature_(std::move(signature)), outParamBuffers_(std::move(outParamBuffers)),
      parallelLoopNames_(parallelLoopNests) {
  auto start = std::chrono::steady_clock::now();
  initializeNativeTarget();
  auto object = llvm::MemoryBuffer::getFile(objectPath);
  if (!object)
    fail("compiled mode: cannot read the object file '{}': {}", objectPath,
         object.getError().message());
  // Linked as MLIR's engine links the code it generates (RuntimeDyld, the
  // section memory manager), so the same object behaves the same.
  auto jit =
      llvm::orc::LLJITBuilder()
          .setObjectLinkingLayerCreator([](llvm::orc::ExecutionSession &session)
                                            -> llvm::Expected<std::unique_ptr<llvm::orc::ObjectLayer>> {
            return std::make_unique<llvm::orc::RTDyldObjectLinkingLayer>(
                session, [](const llvm::MemoryBuffer &) {
                  return std::make_unique<llvm::SectionMemoryManager>();
                });
          })
          .create();
  auto check = [&](llvm::Error error, const char *what) {
    if (error)
      fail("compiled mode: the object file '{}' {}: {}", objectPath, what,
           llvm::toString(std::move(error)));
  };
  if (!jit)
    check(jit.takeError(), "cannot be linked here");
  engine_->linked = std::move(*jit);
  llvm::orc::LLJIT &linked = *engine_->linked;
  llvm::orc::MangleAndInterner interner(linked.getExecutionSession(), linked.getDataLayout());
  check(linked.getMainJITDylib().define(
            llvm::orc::absoluteSymbols(hostSymbolMap(interner, hostSymbols))),
        "cannot be linked here");
  auto process = llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(
      linked.getDataLayout().getGlobalPrefix());
  if (!process)
    check(process.takeError(), "cannot be linked here");
  linked.getMainJITDylib().addGenerator(std::move(*process));
  check(linked.addObjectFile(std::move(*object)), "is not an object file Kiln can link");
  bind(
      [&](const std::string &function) -> llvm::Expected<void (*)(void **)> {
        auto address = linked.lookup("_mlir_" + function);
        if (!address)
          return address.takeError();
        return address->toPtr<void (*)(void **)>();
      },
      "'" + objectPath + "'");
  compileSeconds_ =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

template <typename Lookup>
void CompiledFunction::bind(Lookup lookup, const std::string &where) {
  auto entry = lookup(name_);
  if (!entry)
    fail("compiled mode: {} does not compile or link: {}", where,
         llvm::toString(entry.takeError()));
  engine_->entry = *entry;
  for (const std::string &symbol : parallelLoopNames_) {
    auto nest = lookup(symbol);
    if (!nest)
      fail("compiled mode: the loop nest @{} of {} is missing: {}", symbol, where,
           llvm::toString(nest.takeError()));
    engine_->parallelLoops.push_back(*nest);
  }
}

void CompiledFunction::writeObject(const std::string &path) const {
  if (!engine_->engine)
    fail("compiled mode: @{} was linked from an object file, not compiled here", name_);
  // dumpToObjectFile reports a failure on stderr only: check the file.
  std::error_code ec;
  std::filesystem::remove(path, ec);
  engine_->engine->dumpToObjectFile(path);
  if (!std::filesystem::exists(path, ec) || std::filesystem::file_size(path, ec) == 0)
    fail("compiled mode: the object code of @{} could not be written to '{}'", name_, path);
}

CompiledFunction::~CompiledFunction() = default;

size_t CompiledFunction::threadedLoopNests() const { return engine_->parallelLoops.size(); }

const std::vector<std::string> &CompiledFunction::threadedLoopNestNames() const {
  return parallelLoopNames_;
}

std::vector<Tensor> CompiledFunction::operator()(const std::vector<Tensor> &arguments) const {
  // Copies share the buffers: nothing is uniquely owned, nothing donated.
  std::vector<Tensor> shared = arguments;
  return call(shared, /*donate=*/false);
}

std::vector<Tensor> CompiledFunction::donating(std::vector<Tensor> &arguments) const {
  return call(arguments, /*donate=*/true);
}

std::vector<Tensor> CompiledFunction::call(std::vector<Tensor> &arguments, bool donate) const {
  const std::vector<TensorSignature> &params = signature_.arguments;
  if (arguments.size() != params.size())
    fail("compiled mode: @{} takes {} arguments, given {}", name_, params.size(),
         arguments.size());
  for (size_t i = 0; i < arguments.size(); ++i) {
    const Tensor &a = arguments[i];
    if (a.dtype() != params[i].dtype || a.shape() != params[i].shape)
      fail("compiled mode: argument {} of @{} must be {}, given {}", i, name_,
           describe(params[i]), describe({a.dtype(), a.shape()}));
  }

  // Each memref as its exploded descriptor words, and a pointer to each word.
  std::vector<std::vector<int64_t>> words;
  // The arguments are passed in place: the lowering writes one only as the
  // out-parameter whose buffer it may share (outParamBuffers).
  auto describeBuffer = [&](const Tensor &t) {
    std::vector<int64_t> w;
    auto pointer = reinterpret_cast<int64_t>(t.rawData());
    w.push_back(pointer);
    w.push_back(pointer);
    w.push_back(0);
    for (int64_t size : t.shape())
      w.push_back(size);
    std::vector<int64_t> strides(t.rank(), 1);
    for (int64_t d = int64_t(t.rank()) - 2; d >= 0; --d)
      strides[d] = strides[d + 1] * t.dim(d + 1);
    w.insert(w.end(), strides.begin(), strides.end());
    words.push_back(std::move(w));
  };
  for (const Tensor &t : arguments)
    describeBuffer(t);
  std::vector<Tensor> results;
  for (size_t k = 0; k < signature_.results.size(); ++k) {
    const TensorSignature &r = signature_.results[k];
    int64_t a = k < outParamBuffers_.size() ? outParamBuffers_[k] : -1;
    if (donate && a >= 0 && arguments[size_t(a)].isUniquelyOwned()) {
      results.push_back(std::move(arguments[size_t(a)]));
      arguments[size_t(a)] = Tensor(); // a moved-from tensor keeps its pointer
    } else
      results.push_back(Tensor::uninitialized(r.dtype, r.shape));
    describeBuffer(results.back());
  }
  std::vector<void *> packed;
  for (std::vector<int64_t> &w : words)
    for (int64_t &word : w)
      packed.push_back(&word);
  {
    // This function's arena for the call (and only then), however it ends.
    struct Activation {
      StepArena *outer;
      const Engine *outerEngine;
      Activation(StepArena *arena, const Engine *engine)
          : outer(activeArena), outerEngine(activeEngine) {
        activeArena = arena;
        activeEngine = engine;
        arena->begin();
      }
      ~Activation() {
        activeArena->end();
        activeArena = outer;
        activeEngine = outerEngine;
      }
    } activation(arena_.get(), engine_.get());
    engine_->entry(packed.data());
  }
  int64_t held = 0; // a donated argument is its result
  for (const Tensor &t : arguments)
    if (t.defined())
      held += int64_t(t.nbytes());
  for (const Tensor &t : results)
    held += int64_t(t.nbytes());
  lastPeakLiveBytes_ = held + arena_->lastRun().peakLiveBytes;
  return results;
}

} // namespace kiln
