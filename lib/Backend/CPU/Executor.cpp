//===- Executor.cpp - Eager CPU execution of kiln IR ----------------------===//

#include "kiln/Backend/CPU/Executor.h"
#include "kiln/Analysis/BufferLiveness.h"
#include "kiln/Backend/CPU/CpuKernelInterface.h"
#include "kiln/Dialect/Kiln/IR/KilnOps.h"
#include "kiln/Runtime/HfCheckpoint.h"
#include "kiln/Runtime/ThreadBudget.h"
#include "kiln/Support/Diagnostics.h"
#include "kiln/Support/Error.h"

#include "llvm/ADT/DenseMap.h"

#include <chrono>
#include <set>

using namespace mlir;

namespace kiln {

Shape shapeOf(Type type) {
  auto tensor = cast<RankedTensorType>(type);
  return Shape(tensor.getShape().begin(), tensor.getShape().end());
}

DType computeDType(Type type) {
  Type elt = cast<RankedTensorType>(type).getElementType();
  if (isa<FloatType>(elt))
    return DType::F32;
  return elt.getIntOrFloatBitWidth() == 32 ? DType::I32 : DType::I64;
}

namespace {

std::string describe(Operation *op) {
  std::string name = op->getName().getStringRef().str();
  if (auto fqn = op->getAttrOfType<StringAttr>("fqn"))
    name += " (fqn '" + fqn.str() + "')";
  return name;
}

/// Live bytes by distinct buffer: values that share bytes (reshape views)
/// are counted once, when the first appears and until the last goes.
class LiveBytes {
public:
  void add(const Tensor &t) {
    auto &entry = buffers[t.rawData()];
    if (entry.second++ == 0) {
      entry.first = t.nbytes();
      live += entry.first;
      peak = std::max(peak, live);
    }
  }
  void remove(const void *buffer) {
    auto it = buffers.find(buffer);
    if (it != buffers.end() && --it->second.second == 0) {
      live -= it->second.first;
      buffers.erase(it);
    }
  }
  int64_t live = 0, peak = 0;

private:
  llvm::DenseMap<const void *, std::pair<int64_t, int64_t>> buffers; // bytes, refs
};

} // namespace

std::vector<Tensor> runFunction(func::FuncOp fn, std::vector<Tensor> args,
                                ExecutionStats *stats, const ExecutionContext &context,
                                std::vector<Tensor> *unusedOnFailure) {
  std::string name = "@" + fn.getName().str();
  if (fn.isExternal())
    fail("{} is a declaration; it has no body to run", name);
  registerCpuKernels(*fn->getContext());
  FailureOr<BufferLiveness> liveness = failure();
  succeedOrFail(*fn->getContext(), name + " cannot be executed", [&] {
    liveness = BufferLiveness::compute(fn);
    return LogicalResult(liveness);
  });
  Block &body = liveness->body();
  if (args.size() != body.getNumArguments())
    fail("{}: expected {} arguments, got {}", name, body.getNumArguments(), args.size());

  llvm::DenseMap<Value, Tensor> env;
  LiveBytes memory;
  auto define = [&](Value value, Tensor tensor) {
    if (value.use_empty())
      return;
    memory.add(tensor);
    env[value] = std::move(tensor);
  };
  for (auto [arg, tensor] : llvm::zip(body.getArguments(), args))
    define(arg, std::move(tensor));
  args.clear();
  ThreadBudget threads = ThreadBudget::threads(context.threads);

  // On failure, hand the caller back the arguments no op has consumed yet,
  // so state moved into a failed run is not lost with it.
  auto recoverArguments = [&] {
    if (!unusedOnFailure)
      return;
    unusedOnFailure->assign(body.getNumArguments(), Tensor());
    for (BlockArgument arg : body.getArguments())
      if (auto it = env.find(arg); it != env.end())
        (*unusedOnFailure)[arg.getArgNumber()] = std::move(it->second);
  };

  std::vector<Tensor> results;
  SmallVector<Tensor> operands, outs;
  SmallVector<const void *> operandBuffers; // kernels may move operands away
  for (Operation &op : body) {
    if (isa<func::ReturnOp>(op)) {
      for (Value operand : op.getOperands())
        results.push_back(env.lookup(operand));
      break;
    }
    auto kernel = dyn_cast<CpuKernelOpInterface>(op);
    if (!kernel) {
      recoverArguments();
      fail("{}: op {} has no CPU kernel", name, describe(&op));
    }
    // Donated operands are moved in, so the kernel may write a result into
    // their buffer; the rest are shared with the environment.
    const BufferLiveness::Step &step = liveness->step(&op);
    operands.clear();
    operandBuffers.clear();
    for (Value operand : op.getOperands()) {
      operands.push_back(env.lookup(operand));
      operandBuffers.push_back(operands.back().rawData());
    }
    for (std::optional<unsigned> donor : step.donors)
      if (donor)
        operands[*donor] = std::move(env[op.getOperand(*donor)]);
    outs.clear();
    bool collective = op.getDialect() && op.getDialect()->getNamespace() == "shard";
    auto started = std::chrono::steady_clock::now();
    try {
      kernel.runOnCpu(context, operands, outs);
    } catch (const Error &e) {
      for (std::optional<unsigned> donor : step.donors) // put donors back, untouched
        if (donor && operands[*donor].defined() &&
            operands[*donor].rawData() == operandBuffers[*donor])
          env[op.getOperand(*donor)] = std::move(operands[*donor]);
      recoverArguments();
      fail("{}: {}: {}", name, describe(&op), e.what());
    }
    if (stats && (collective || stats->timeOps)) {
      double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
      if (collective)
        stats->collectiveSeconds += seconds;
      if (stats->timeOps)
        stats->opSeconds[&op] += seconds;
    }
    if (outs.size() != op.getNumResults())
      fail("{}: {}: kernel returned {} results, expected {}", name, describe(&op), outs.size(),
           op.getNumResults());
    for (auto [result, tensor] : llvm::zip(op.getResults(), outs)) {
      if (tensor.shape() != shapeOf(result.getType()))
        fail("{}: {}: kernel produced {} but the IR says {}", name, describe(&op),
             shapeToString(tensor.shape()), shapeToString(shapeOf(result.getType())));
      define(result, std::move(tensor));
    }
    // Dying operands leave the live set after the results joined it, so a
    // result written in place keeps its buffer counted throughout.
    for (unsigned index : step.dyingOperands)
      if (env.erase(op.getOperand(index)))
        memory.remove(operandBuffers[index]);
    operands.clear(); // moved-in operands the op did not reuse are freed now
  }
  if (stats)
    stats->peakLiveBytes = memory.peak;
  return results;
}

namespace {
/// Checks `value` against `type`: its shape and whether it is float or ids.
void check(const Tensor &value, Type type, const std::string &what, const std::string &user) {
  Shape expected = shapeOf(type);
  if (value.shape() != expected)
    fail("{}: shape {} does not match {} expected by {} (check config.json against the "
         "checkpoint)",
         what, shapeToString(value.shape()), shapeToString(expected), user);
  bool isFloat = value.dtype() == DType::F32 || value.dtype() == DType::BF16 ||
                 value.dtype() == DType::F16;
  if (isFloat != (computeDType(type) == DType::F32))
    fail("{}: dtype {} cannot bind to {}", what, dtypeName(value.dtype()),
         isFloat ? "an integer tensor" : "a float tensor");
}

/// `value` in the dtype the executor computes `type` in.
Tensor toCompute(Tensor value, Type type) {
  DType want = computeDType(type);
  return value.dtype() == want ? value : (want == DType::F32 ? value.toF32() : value.to(want));
}

/// Checks `value` against `type` and converts it to the executor's dtype.
Tensor conform(Tensor value, Type type, const std::string &what, const std::string &user) {
  check(value, type, what, user);
  return toCompute(std::move(value), type);
}
} // namespace

Tensor bindParameter(const Checkpoint &checkpoint, const std::string &key, Type type,
                     const std::string &user, llvm::function_ref<Tensor(Tensor)> slice) {
  if (isStackedKey(key)) {
    // HF stores each member on its own: read them one by one and stack them.
    auto tensorType = cast<RankedTensorType>(type);
    Type memberType = tensorType.clone(tensorType.getShape().drop_front());
    std::vector<Tensor> members;
    for (int64_t i = 0; i < tensorType.getDimSize(0); ++i)
      members.push_back(bindParameter(checkpoint, stackMemberKey(key, i), memberType, user));
    Tensor stacked = stackTensors(members);
    return slice ? slice(stacked) : stacked;
  }
  if (!checkpoint.contains(key))
    fail("{}: missing parameter '{}' needed by {}", checkpoint.path(), key, user);
  Tensor stored = checkpoint.get(key);
  check(stored, type, fmt::format("{}: tensor '{}'", checkpoint.path(), key), user);
  // Slice the mapped file before converting: only this rank's part is read.
  Tensor part = slice ? slice(stored) : stored;
  Tensor value = toCompute(part, type);
  // An owned copy: the run must not depend on the file staying unchanged.
  return value.rawData() == stored.rawData() ? value.to(value.dtype()) : value;
}

void checkAllTensorsUsed(const Checkpoint &checkpoint, func::FuncOp fn) {
  std::set<std::string> used;
  for (unsigned i = 0, e = fn.getNumArguments(); i < e; ++i)
    if (auto key = fn.getArgAttrOfType<StringAttr>(i, kParamAttr)) {
      if (!isStackedKey(key.str())) {
        used.insert(key.str());
        continue;
      }
      int64_t members = cast<RankedTensorType>(fn.getArgumentTypes()[i]).getDimSize(0);
      for (int64_t m = 0; m < members; ++m)
        used.insert(stackMemberKey(key.str(), m));
    }
  // A tied model's checkpoint may repeat the embedding as lm_head.weight.
  bool tied = !used.count("lm_head.weight") && used.count("model.embed_tokens.weight");
  std::vector<std::string> unused;
  for (const std::string &name : checkpoint.names())
    if (!used.count(name) && !(tied && name == "lm_head.weight"))
      unused.push_back(name);
  if (unused.empty())
    return;
  std::string list;
  for (size_t i = 0; i < std::min<size_t>(unused.size(), 4); ++i)
    list += (i ? ", " : "") + unused[i];
  fail("{}: {} tensor{} the model does not use ({}{}): does config.json describe this "
       "checkpoint?",
       checkpoint.path(), unused.size(), unused.size() == 1 ? "" : "s", list,
       unused.size() > 4 ? ", ..." : "");
}

std::vector<Tensor> bindArguments(func::FuncOp fn, const Checkpoint &checkpoint,
                                  const std::map<std::string, Tensor> &inputs) {
  checkAllTensorsUsed(checkpoint, fn);
  std::string user = "@" + fn.getName().str();
  std::vector<Tensor> args;
  for (unsigned i = 0, e = fn.getNumArguments(); i < e; ++i) {
    Type type = fn.getArgumentTypes()[i];
    if (auto key = fn.getArgAttrOfType<StringAttr>(i, kParamAttr)) {
      args.push_back(bindParameter(checkpoint, key.str(), type, user));
    } else if (auto name = fn.getArgAttrOfType<StringAttr>(i, kInputAttr)) {
      auto it = inputs.find(name.str());
      if (it == inputs.end())
        fail("{}: no value given for input '{}'", user, name.str());
      args.push_back(conform(it->second, type, fmt::format("input '{}'", name.str()), user));
    } else {
      fail("{}: argument {} is neither a parameter nor a named input", user, i);
    }
  }
  return args;
}

} // namespace kiln
