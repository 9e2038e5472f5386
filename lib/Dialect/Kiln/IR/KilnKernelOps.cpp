//===- KilnKernelOps.cpp - Kernel calls, transposes, the kernel registry --===//
//
// kiln.kernel and kiln.kernel_backward defer every question (types, cost,
// sharding, VJP) to the KernelSpec their `kernel` names; kiln.transpose is
// an ordinary op whose VJP is the inverse permutation.
//
//===----------------------------------------------------------------------===//

#include "ShapeRules.h"

#include "kiln/Dialect/Kiln/IR/KilnOps.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringMap.h"

#include <mutex>

using namespace mlir;
using namespace kiln;
using namespace kiln::detail;

//===----------------------------------------------------------------------===//
// The registry
//===----------------------------------------------------------------------===//

KernelSpec::~KernelSpec() = default;

namespace {
struct Registry {
  std::mutex mutex;
  llvm::StringMap<std::unique_ptr<KernelSpec>> specs;
};
Registry &registry() {
  static Registry r;
  return r;
}
} // namespace

void kiln::registerKernelSpec(std::unique_ptr<KernelSpec> spec) {
  Registry &r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  std::string name = spec->name().str();
  if (!r.specs.try_emplace(name, std::move(spec)).second)
    llvm::report_fatal_error(llvm::Twine("kernel '") + name + "' registered twice");
}

const KernelSpec *kiln::lookupKernelSpec(StringRef name) {
  Registry &r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto it = r.specs.find(name);
  return it == r.specs.end() ? nullptr : it->second.get();
}

std::vector<const KernelSpec *> kiln::registeredKernelSpecs() {
  Registry &r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  std::vector<const KernelSpec *> specs;
  for (auto &entry : r.specs)
    specs.push_back(entry.second.get());
  llvm::sort(specs, [](auto *a, auto *b) { return a->name() < b->name(); });
  return specs;
}

//===----------------------------------------------------------------------===//
// kiln.kernel / kiln.kernel_backward
//===----------------------------------------------------------------------===//

namespace {
/// The verifier of both call ops: a registered kernel whose target is the
/// op's `target`, then the spec's own type checks.
LogicalResult verifyKernelCall(Operation *op, StringRef kernel, StringRef target,
                               bool backward) {
  const KernelSpec *spec = lookupKernelSpec(kernel);
  auto fqn = op->getAttrOfType<StringAttr>("fqn");
  if (!spec) {
    std::string known;
    for (const KernelSpec *s : registeredKernelSpecs())
      known += (known.empty() ? "" : ", ") + s->name().str();
    return op->emitOpError() << "(fqn '" << fqn.getValue() << "'): unknown kernel '" << kernel
                             << "' (registered: " << (known.empty() ? "none" : known) << ")";
  }
  if (spec->targetOp() != target)
    return op->emitOpError() << "(fqn '" << fqn.getValue() << "'): kernel '" << kernel
                             << "' replaces '" << spec->targetOp() << "', not '" << target
                             << "'";
  return spec->verify(op, backward);
}
} // namespace

const KernelSpec &KernelOp::getSpec() { return *lookupKernelSpec(getKernel()); }
const KernelSpec &KernelBackwardOp::getSpec() { return *lookupKernelSpec(getKernel()); }

LogicalResult KernelOp::verify() {
  return verifyKernelCall(*this, getKernel(), getTarget(), /*backward=*/false);
}
LogicalResult KernelBackwardOp::verify() {
  return verifyKernelCall(*this, getKernel(), getTarget(), /*backward=*/true);
}

double KernelOp::getFlops() { return getSpec().flops(*this, false); }
double KernelBackwardOp::getFlops() { return getSpec().flops(*this, true); }
int64_t KernelOp::getBytesRead() {
  return tensorBytes(getOperandTypes()) + getSpec().passBytes(*this, false) / 2;
}
int64_t KernelOp::getBytesWritten() {
  return tensorBytes(getResultTypes()) + getSpec().passBytes(*this, false) / 2;
}
int64_t KernelBackwardOp::getBytesRead() {
  return tensorBytes(getOperandTypes()) + getSpec().passBytes(*this, true) / 2;
}
int64_t KernelBackwardOp::getBytesWritten() {
  return tensorBytes(getResultTypes()) + getSpec().passBytes(*this, true) / 2;
}
void KernelOp::getGemms(SmallVectorImpl<GemmShape> &gemms) {
  getSpec().gemms(*this, false, gemms);
}
void KernelBackwardOp::getGemms(SmallVectorImpl<GemmShape> &gemms) {
  getSpec().gemms(*this, true, gemms);
}
ShardingRule KernelOp::getShardingRule() { return getSpec().shardingRule(*this, false); }
ShardingRule KernelBackwardOp::getShardingRule() { return getSpec().shardingRule(*this, true); }

LogicalResult KernelOp::buildVjp(OpBuilder &b, ArrayRef<Value> resultGrads,
                                 SmallVectorImpl<Value> &operandGrads) {
  return getSpec().buildVjp(*this, b, resultGrads, operandGrads);
}

SmallVector<Value> KernelBackwardOp::getCotangents() {
  SmallVector<Value> cotangents;
  for (unsigned i : getSpec().cotangentOperands())
    cotangents.push_back(getOperand(i));
  return cotangents;
}

//===----------------------------------------------------------------------===//
// kiln.transpose
//===----------------------------------------------------------------------===//

LogicalResult TransposeOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                            Adaptor adaptor, SmallVectorImpl<Type> &types) {
  StringRef fqn = adaptor.getFqn();
  if (failed(checkOperands<TransposeOp>(loc, fqn, {{"input", adaptor.getInput(), -1, Elt::Float}})))
    return failure();
  auto type = cast<RankedTensorType>(adaptor.getInput().getType());
  ArrayRef<int64_t> perm = adaptor.getPermutation();
  if (int64_t(perm.size()) != type.getRank())
    return shapeError<TransposeOp>(loc, fqn, "permutation has ", perm.size(),
                                   " entries for an input of rank ", type.getRank());
  SmallVector<bool> seen(perm.size(), false);
  SmallVector<int64_t> shape;
  for (int64_t p : perm) {
    if (p < 0 || p >= type.getRank() || seen[p])
      return shapeError<TransposeOp>(loc, fqn, "permutation [", perm,
                                     "] is not a permutation of 0..", type.getRank() - 1);
    seen[p] = true;
    shape.push_back(type.getDimSize(p));
  }
  types.push_back(withShape(type, shape));
  return success();
}

double TransposeOp::getFlops() { return 0; }

ShardingRule TransposeOp::getShardingRule() {
  ShardingRule rule;
  SmallVector<int64_t> in;
  for (size_t i = 0; i < getPermutation().size(); ++i)
    in.push_back(rule.loop());
  SmallVector<int64_t> out;
  for (int64_t p : getPermutation())
    out.push_back(in[p]);
  rule.operands = {in};
  rule.results = {out};
  rule.sumsPartials = true;
  return rule;
}

LogicalResult TransposeOp::buildVjp(OpBuilder &b, ArrayRef<Value> gradOut,
                                    SmallVectorImpl<Value> &gradIn) {
  ArrayRef<int64_t> perm = getPermutation();
  SmallVector<int64_t> inverse(perm.size());
  for (size_t i = 0; i < perm.size(); ++i)
    inverse[perm[i]] = int64_t(i);
  gradIn.push_back(TransposeOp::create(b, getLoc(), gradOut[0],
                                       b.getDenseI64ArrayAttr(inverse), getFqnAttr()));
  return success();
}

OpFoldResult TransposeOp::fold(FoldAdaptor) {
  ArrayRef<int64_t> perm = getPermutation();
  auto isIdentity = [](ArrayRef<int64_t> p) {
    for (size_t i = 0; i < p.size(); ++i)
      if (p[i] != int64_t(i))
        return false;
    return true;
  };
  if (isIdentity(perm))
    return getInput();
  // transpose(transpose(x, p), q) is x when q undoes p: composed[i] = p[q[i]].
  if (auto inner = getInput().getDefiningOp<TransposeOp>()) {
    ArrayRef<int64_t> first = inner.getPermutation();
    SmallVector<int64_t> composed;
    for (int64_t q : perm)
      composed.push_back(first[q]);
    if (isIdentity(composed))
      return inner.getInput();
  }
  return {};
}
