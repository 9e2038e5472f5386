//===- Executor.cpp - Eager CPU execution of kiln IR ----------------------===//

#include "kiln/Execution/Executor.h"
#include "kiln/Dialect/Kiln/IR/KilnOps.h"
#include "kiln/Support/Error.h"

#include "llvm/ADT/DenseMap.h"

using namespace mlir;

namespace kiln {

namespace {

std::string describe(Operation *op) {
  std::string name = op->getName().getStringRef().str();
  if (auto fqn = op->getAttrOfType<StringAttr>("fqn"))
    name += " (fqn '" + fqn.str() + "')";
  return name;
}

Shape shapeOf(Type type) {
  auto tensor = cast<RankedTensorType>(type);
  return Shape(tensor.getShape().begin(), tensor.getShape().end());
}

/// The host dtype a value of `type` is computed in.
DType computeDType(Type type) {
  Type elt = cast<RankedTensorType>(type).getElementType();
  if (isa<FloatType>(elt))
    return DType::F32;
  return elt.getIntOrFloatBitWidth() == 32 ? DType::I32 : DType::I64;
}

} // namespace

std::vector<Tensor> runFunction(func::FuncOp fn, const std::vector<Tensor> &args) {
  Block &body = fn.getBody().front();
  if (args.size() != body.getNumArguments())
    fail("@{}: expected {} arguments, got {}", fn.getName().str(), body.getNumArguments(),
         args.size());

  // Index of the last op that reads each value, so it can be freed there.
  llvm::DenseMap<Value, Operation *> lastUser;
  for (Operation &op : body)
    for (Value operand : op.getOperands())
      lastUser[operand] = &op;

  llvm::DenseMap<Value, Tensor> env;
  for (auto [arg, tensor] : llvm::zip(body.getArguments(), args))
    env[arg] = tensor;

  std::vector<Tensor> results;
  SmallVector<Tensor> operands, outs;
  for (Operation &op : body) {
    operands.clear();
    for (Value operand : op.getOperands())
      operands.push_back(env.lookup(operand));

    if (isa<func::ReturnOp>(op)) {
      results.assign(operands.begin(), operands.end());
      break;
    }
    auto kernel = dyn_cast<CpuKernelOpInterface>(op);
    if (!kernel)
      fail("@{}: op {} has no CPU kernel", fn.getName().str(), describe(&op));
    outs.clear();
    try {
      kernel.runOnCpu(operands, outs);
    } catch (const Error &e) {
      fail("@{}: {}: {}", fn.getName().str(), describe(&op), e.what());
    }
    if (outs.size() != op.getNumResults())
      fail("@{}: {}: kernel returned {} results, expected {}", fn.getName().str(),
           describe(&op), outs.size(), op.getNumResults());
    for (auto [result, tensor] : llvm::zip(op.getResults(), outs)) {
      if (tensor.shape() != shapeOf(result.getType()))
        fail("@{}: {}: kernel produced {} but the IR says {}", fn.getName().str(),
             describe(&op), shapeToString(tensor.shape()),
             shapeToString(shapeOf(result.getType())));
      if (!result.use_empty())
        env[result] = std::move(tensor);
    }
    for (Value operand : op.getOperands())
      if (lastUser.lookup(operand) == &op)
        env.erase(operand);
  }
  return results;
}

std::vector<Tensor> bindArguments(func::FuncOp fn, const Checkpoint &checkpoint,
                                  const std::map<std::string, Tensor> &inputs) {
  std::vector<Tensor> args;
  for (unsigned i = 0, e = fn.getNumArguments(); i < e; ++i) {
    Type type = fn.getArgumentTypes()[i];
    Shape expected = shapeOf(type);
    Tensor value;
    std::string what;
    if (auto key = fn.getArgAttrOfType<StringAttr>(i, kParamAttr)) {
      what = fmt::format("{}: tensor '{}'", checkpoint.path(), key.str());
      if (!checkpoint.contains(key.str()))
        fail("{}: missing parameter '{}' needed by @{}", checkpoint.path(), key.str(),
             fn.getName().str());
      value = checkpoint.get(key.str());
    } else if (auto name = fn.getArgAttrOfType<StringAttr>(i, kInputAttr)) {
      what = fmt::format("input '{}'", name.str());
      auto it = inputs.find(name.str());
      if (it == inputs.end())
        fail("@{}: no value given for input '{}'", fn.getName().str(), name.str());
      value = it->second;
    } else {
      fail("@{}: argument {} is neither a parameter nor a named input",
           fn.getName().str(), i);
    }
    if (value.shape() != expected)
      fail("{}: shape {} does not match {} expected by @{} (check config.json against "
           "the checkpoint)",
           what, shapeToString(value.shape()), shapeToString(expected), fn.getName().str());
    DType want = computeDType(type);
    bool isFloat = value.dtype() == DType::F32 || value.dtype() == DType::BF16 ||
                   value.dtype() == DType::F16;
    if (isFloat != (want == DType::F32))
      fail("{}: dtype {} cannot bind to {}", what, dtypeName(value.dtype()),
           want == DType::F32 ? "a float tensor" : "an integer tensor");
    if (value.dtype() != want)
      value = want == DType::F32 ? value.toF32() : value.to(want);
    args.push_back(value);
  }
  return args;
}

} // namespace kiln
