//===- KernelCheck.cpp - A kernel against the ops it replaces -------------===//
//
// Both sides are compiled by the real pipeline: the replaced op(s) in one
// function, the same op(s) substituted by an exact override rule in a second,
// each differentiated by buildReverseMode and run by the CPU executor on the
// same random inputs and cotangents.
//
//===----------------------------------------------------------------------===//

#include "kiln/Backend/CPU/CpuKernelInterface.h"
#include "kiln/Backend/CPU/Executor.h"
#include "kiln/CustomKernels/CheckCase.h"
#include "kiln/CustomKernels/Registry.h"
#include "kiln/Driver/KernelCheck.h"
#include "kiln/Config/OverrideRules.h"
#include "kiln/Dialect/Kiln/IR/KernelSpec.h"
#include "kiln/Dialect/Kiln/IR/KilnDialect.h"
#include "kiln/Passes/Kiln/ReverseMode.h"
#include "kiln/Passes/Kiln/Passes.h"
#include "kiln/Support/Diagnostics.h"
#include "kiln/Support/Error.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"

#include <cmath>
#include <cstring>
#include <random>

namespace kiln {

using namespace mlir;

namespace {

/// The most input elements a check allocates (4 GiB of f32; the forward, the
/// backward and both sides' intermediates come on top).
constexpr int64_t kMaxCheckElements = int64_t(1) << 30;

/// bf16 keeps the top 16 bits of an f32 (round to nearest even).
float roundToBf16(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  if ((bits & 0x7f800000u) != 0x7f800000u)
    bits += 0x7fffu + ((bits >> 16) & 1u);
  bits &= 0xffff0000u;
  std::memcpy(&x, &bits, 4);
  return x;
}

void roundTensorToBf16(Tensor &t) {
  float *data = t.mutableData<float>();
  for (int64_t i = 0; i < t.numel(); ++i)
    data[i] = roundToBf16(data[i]);
}

Tensor randomInput(const CheckableKernel::CheckInput &input, std::mt19937_64 &rng) {
  Shape shape(input.type.getShape().begin(), input.type.getShape().end());
  if (!input.idBound) {
    Tensor t(DType::F32, shape);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (int64_t i = 0; i < t.numel(); ++i)
      t.mutableData<float>()[i] = normal(rng);
    return t;
  }
  Tensor t(DType::I64, shape);
  int64_t *ids = t.mutableData<int64_t>();
  int64_t row = shape.empty() ? 1 : shape.back();
  std::uniform_int_distribution<int64_t> pick(0, input.idBound - 1);
  for (int64_t start = 0; start < t.numel(); start += row)
    for (int64_t j = 0; j < row; ++j) {
      int64_t id;
      do
        id = pick(rng);
      while (input.distinctPerRow && std::find(ids + start, ids + start + j, id) != ids + start + j);
      ids[start + j] = id;
    }
  return t;
}

/// Adds the backward to `fn` (forward results on its return): one cotangent
/// argument per differentiable result, and the input gradients as results.
void addBackward(func::FuncOp fn, ArrayRef<bool> differentiable, unsigned numInputs,
                 ArrayRef<bool> floatInput) {
  Block &body = fn.getBody().front();
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  SmallVector<Operation *> forward;
  for (Operation &op : body.without_terminator())
    forward.push_back(&op);
  OpBuilder b(ret);
  SmallVector<std::pair<Value, Value>> seeds;
  for (auto [i, result] : llvm::enumerate(ret.getOperands()))
    if (differentiable[i])
      seeds.push_back({result, body.addArgument(result.getType(), fn.getLoc())});
  SmallVector<Value> wrt;
  for (unsigned i = 0; i < numInputs; ++i)
    if (floatInput[i])
      wrt.push_back(body.getArgument(i));
  FailureOr<SmallVector<Value>> grads = buildReverseMode(b, forward, seeds, wrt);
  if (failed(grads))
    fail("check-kernel: differentiating @{} failed", fn.getSymName().str());
  SmallVector<Value> results(ret.getOperands());
  for (Value g : *grads) {
    if (!g)
      fail("check-kernel: an input of @{} gets no gradient", fn.getSymName().str());
    results.push_back(g);
  }
  func::ReturnOp::create(b, ret.getLoc(), results);
  ret.erase();
  fn.setFunctionType(b.getFunctionType(body.getArgumentTypes(), ValueRange(results).getTypes()));
}

} // namespace

bool KernelCheckReport::passed() const {
  for (const Output &o : outputs)
    if (!(o.maxAbs <= tolerance))
      return false;
  return true;
}

std::vector<std::string> registeredKernelNames() {
  registerCustomKernels();
  std::vector<std::string> names;
  for (const KernelSpec *spec : registeredKernelSpecs())
    names.push_back(spec->name().str());
  return names;
}

/// The registered kernel `name`, which is also its check case.
static const KernelSpec &registeredKernel(const std::string &name) {
  registerCustomKernels();
  const KernelSpec *spec = lookupKernelSpec(name);
  if (!spec) {
    std::string known;
    for (const std::string &n : registeredKernelNames())
      known += (known.empty() ? "" : ", ") + n;
    fail("check-kernel: unknown kernel '{}' (registered: {})", name, known);
  }
  return *spec;
}

static const CheckableKernel &checkCase(const KernelSpec &spec) {
  return dynamic_cast<const CheckableKernel &>(spec);
}

KernelCheckShape kernelCheckShape(const std::string &kernel) {
  return checkCase(registeredKernel(kernel)).checkShape();
}

KernelCheckReport checkKernel(const std::string &name, const KernelCheckOptions &options) {
  const KernelSpec &spec = registeredKernel(name);
  const CheckableKernel &kernel = checkCase(spec);
  KernelCheckShape shape = kernel.checkShape();
  for (const auto &[key, value] : options.shape) {
    auto it = std::find_if(shape.begin(), shape.end(), [&](auto &d) { return d.first == key; });
    if (it == shape.end()) {
      std::string known;
      for (const auto &d : shape)
        known += (known.empty() ? "" : ", ") + d.first;
      fail("check-kernel {}: unknown dimension '{}' in --shape (known: {})", name, key, known);
    }
    if (value < 1)
      fail("check-kernel {}: --shape {}={} must be positive", name, key, value);
    it->second = value;
  }
  if (std::string problem = kernel.checkShapeProblem(shape); !problem.empty())
    fail("check-kernel {}: --shape: {}", name, problem);

  MLIRContext context;
  context.loadDialect<KilnDialect, func::FuncDialect>();
  registerCpuKernels(context);
  OpBuilder b(&context);
  Location loc = b.getUnknownLoc();
  OwningOpRef<ModuleOp> module = ModuleOp::create(loc);
  SmallVector<CheckableKernel::CheckInput> inputs = kernel.checkInputs(&context, shape);
  // Element counts in 128-bit arithmetic: a product wrapping to 0 compared
  // nothing and printed PASS.
  __int128 elements = 0;
  for (const auto &input : inputs) {
    __int128 n = 1;
    for (int64_t d : input.type.getShape())
      n = std::min<__int128>(n * d, __int128(1) << 100);
    elements += n;
  }
  if (elements > kMaxCheckElements)
    fail("check-kernel {}: --shape gives inputs of {:.3g} elements, more than the {} "
         "(2^30) a check runs; give smaller dimensions",
         name, double(elements), kMaxCheckElements);
  SmallVector<Type> inputTypes;
  SmallVector<bool> floatInput;
  for (const auto &input : inputs) {
    inputTypes.push_back(input.type);
    floatInput.push_back(input.idBound == 0);
  }
  // The same forward twice; only "kernel"'s node is selected by the rule.
  SmallVector<bool> differentiable;
  SmallVector<std::string> resultNames;
  auto forwardFunction = [&](StringRef fnName) {
    b.setInsertionPointToEnd(module->getBody());
    auto fn = func::FuncOp::create(b, loc, fnName, b.getFunctionType(inputTypes, {}));
    Block *body = fn.addEntryBlock();
    b.setInsertionPointToEnd(body);
    auto results = kernel.buildReference(b, loc, body->getArguments(), shape, b.getStringAttr(fnName));
    SmallVector<Value> values;
    differentiable.clear();
    resultNames.clear();
    for (const CheckableKernel::CheckResult &result : results) {
      values.push_back(result.value);
      differentiable.push_back(result.differentiable);
      resultNames.push_back(result.name);
    }
    func::ReturnOp::create(b, loc, values);
    fn.setFunctionType(b.getFunctionType(inputTypes, ValueRange(values).getTypes()));
    return fn;
  };
  func::FuncOp reference = forwardFunction("reference");
  func::FuncOp substituted = forwardFunction("kernel");
  OverrideRule rule;
  rule.name = "check";
  rule.target = spec.targetOp().str();
  rule.kernel = name;
  rule.exact = true;
  rule.fqns = {"kernel"};
  rule.source = "check-kernel";
  PassManager pm(&context);
  SubstituteKernelsOptions cpu;
  cpu.targetName = TargetName::Cpu;
  cpu.lnc = 1;
  cpu.log = false;
  pm.addPass(createSubstituteKernels({rule}, cpu));
  succeedOrFail(context, "check-kernel " + name, [&] { return pm.run(*module); });
  addBackward(reference, differentiable, inputs.size(), floatInput);
  addBackward(substituted, differentiable, inputs.size(), floatInput);
  succeedOrFail(context, "check-kernel " + name + ": the check module",
                [&] { return verify(*module); });

  // Inputs then cotangents, identical for both.
  std::mt19937_64 rng(options.seed);
  std::vector<Tensor> args;
  for (const auto &input : inputs)
    args.push_back(randomInput(input, rng));
  for (Type type : reference.getArgumentTypes().drop_front(inputs.size()))
    args.push_back(randomInput({"cotangent", cast<RankedTensorType>(type)}, rng));
  if (options.bf16)
    for (Tensor &t : args)
      if (t.dtype() == DType::F32)
        roundTensorToBf16(t);
  std::vector<Tensor> want = runFunction(reference, args);
  std::vector<Tensor> got = runFunction(substituted, args);

  KernelCheckReport report;
  report.kernel = name;
  report.target = spec.targetOp().str();
  report.shape = shape;
  report.tolerance = spec.tolerance(options.bf16);
  unsigned numResults = differentiable.size();
  for (size_t i = 0; i < want.size(); ++i) {
    Tensor &kernelOut = got[i];
    if (options.bf16)
      roundTensorToBf16(kernelOut); // what a bf16 kernel would hand back
    KernelCheckReport::Output out;
    if (i < numResults) {
      out.name = resultNames[i];
    } else {
      size_t g = i - numResults, seen = 0;
      for (size_t j = 0; j < inputs.size(); ++j)
        if (floatInput[j] && seen++ == g)
          out.name = "d" + inputs[j].name;
    }
    double maxRef = 0;
    for (int64_t e = 0; e < want[i].numel(); ++e) {
      double a = kernelOut.data<float>()[e], r = want[i].data<float>()[e];
      out.maxAbs = std::max(out.maxAbs, std::fabs(a - r));
      if (std::isnan(a) != std::isnan(r))
        out.maxAbs = INFINITY;
      maxRef = std::max(maxRef, std::fabs(r));
    }
    out.maxRel = maxRef > 0 ? out.maxAbs / maxRef : out.maxAbs;
    report.outputs.push_back(out);
  }
  return report;
}

} // namespace kiln
