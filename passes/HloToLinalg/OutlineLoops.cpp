//===- OutlineLoops.cpp - kiln-outline-loops -------------------------------===//
//
// Each top-level loop nest of a function as a function of its own, so that
// LLVM's optimizer works on small functions; a large parallel one run
// across the host's threads (Passes.td says why).
//
//===----------------------------------------------------------------------===//

#include "HloToLinalg.h"
#include "kiln/Dialect/Kiln/IR/KilnDialect.h"
#include "kiln/Passes/HloToLinalg/HostCalls.h"
#include "kiln/Passes/HloToLinalg/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/CallInterfaces.h"
#include "mlir/Transforms/RegionUtils.h"

namespace kiln {
#define GEN_PASS_DEF_OUTLINELOOPS
#include "kiln/Passes/HloToLinalg/Passes.h.inc"
} // namespace kiln

using namespace mlir;
using namespace kiln;

namespace {

/// Values a loop may recompute instead of taking them as arguments.
bool isClonable(Value v) {
  Operation *def = v.getDefiningOp();
  return def && def->getNumOperands() == 0 && def->getNumRegions() == 0 &&
         (def->hasTrait<OpTrait::ConstantLike>() || isa<memref::GetGlobalOp>(def));
}

/// Innermost iterations of the nest `loop` heads (trip counts multiplied
/// down the nest, summed over sibling loops), or nullopt when a bound or
/// step is not a constant.
std::optional<int64_t> iterations(Operation *loop) {
  int64_t trips = 1;
  auto tripsOf = [&](ValueRange lower, ValueRange upper, ValueRange step) {
    for (auto [l, u, s] : llvm::zip(lower, upper, step)) {
      std::optional<int64_t> lc = getConstantIntValue(l), uc = getConstantIntValue(u),
                             sc = getConstantIntValue(s);
      if (!lc || !uc || !sc || *sc <= 0)
        return false;
      trips *= std::max<int64_t>(0, (*uc - *lc + *sc - 1) / *sc);
    }
    return true;
  };
  bool known = false;
  if (auto f = dyn_cast<scf::ForOp>(loop))
    known = tripsOf(f.getLowerBound(), f.getUpperBound(), f.getStep());
  else if (auto p = dyn_cast<scf::ParallelOp>(loop))
    known = tripsOf(p.getLowerBound(), p.getUpperBound(), p.getStep());
  if (!known)
    return std::nullopt;
  int64_t inner = 0;
  bool nested = false;
  for (Region &region : loop->getRegions())
    for (Operation &op : region.getOps())
      if (isa<scf::ForOp, scf::ParallelOp>(op)) {
        std::optional<int64_t> n = iterations(&op);
        if (!n)
          return std::nullopt;
        inner += *n;
        nested = true;
      }
  return trips * (nested ? inner : 1);
}

/// Whether a value of `type` is LLVM arguments of one i64 word each: a
/// memref, an index, an integer or float of 64 bits or fewer.
bool hasPackedWords(Type type) {
  if (isa<MemRefType>(type) || type.isIndex())
    return true;
  if (auto integer = dyn_cast<IntegerType>(type))
    return integer.getWidth() <= 64;
  auto flt = dyn_cast<FloatType>(type);
  return flt && flt.getWidth() <= 64;
}

/// The words of `v`'s LLVM arguments (hasPackedWords), as the packed wrapper
/// of a function taking it reads them: a memref's descriptor (its aligned
/// pointer twice: the loop never frees it), a scalar's bits.
SmallVector<Value> packedWords(OpBuilder &b, Location loc, Value v) {
  Type i64 = b.getI64Type();
  auto word = [&](Value index) -> Value { return arith::IndexCastOp::create(b, loc, i64, index); };
  Type type = v.getType();
  if (auto memref = dyn_cast<MemRefType>(type)) {
    Value pointer = word(memref::ExtractAlignedPointerAsIndexOp::create(b, loc, v));
    auto metadata = memref::ExtractStridedMetadataOp::create(b, loc, v);
    SmallVector<Value> words{pointer, pointer, word(metadata.getOffset())};
    for (Value size : metadata.getSizes())
      words.push_back(word(size));
    for (Value stride : metadata.getStrides())
      words.push_back(word(stride));
    return words;
  }
  if (type.isIndex())
    return {word(v)};
  Value bits = isa<FloatType>(type)
                   ? Value(arith::BitcastOp::create(
                         b, loc, b.getIntegerType(type.getIntOrFloatBitWidth()), v))
                   : v;
  // Narrower than a word: the wrapper reads the low bytes.
  return {type.getIntOrFloatBitWidth() == 64 ? bits : arith::ExtUIOp::create(b, loc, i64, bits)};
}

/// The outlined nest's function: `arguments` (then, for a parallel one, the
/// bounds of its outermost dimension) as parameters, the clonable values
/// cloned in, the nest cloned.
func::FuncOp outlinedFunction(Operation *loop, func::FuncOp parent, StringRef name,
                              ArrayRef<Value> arguments, ArrayRef<Value> cloned, bool bounded,
                              SymbolTable &symbols) {
  OpBuilder b(parent);
  SmallVector<Type> types(ValueRange(arguments).getTypes());
  if (bounded)
    types.append(2, b.getIndexType());
  auto func = func::FuncOp::create(b, loop->getLoc(), name, b.getFunctionType(types, {}));
  func->setAttr("passthrough", b.getArrayAttr({b.getStringAttr("noinline")}));
  symbols.insert(func);
  Block *entry = func.addEntryBlock();
  OpBuilder inside = OpBuilder::atBlockBegin(entry);
  IRMapping mapping;
  for (auto [v, arg] : llvm::zip(arguments, entry->getArguments()))
    mapping.map(v, arg);
  for (Value v : cloned)
    mapping.map(v, inside.clone(*v.getDefiningOp())->getResult(0));
  Operation *copy = inside.clone(*loop, mapping);
  if (bounded) {
    auto parallel = cast<scf::ParallelOp>(copy);
    parallel.getLowerBoundMutable()[0].set(entry->getArgument(arguments.size()));
    parallel.getUpperBoundMutable()[0].set(entry->getArgument(arguments.size() + 1));
  }
  func::ReturnOp::create(inside, loop->getLoc());
  return func;
}

/// Outlines `loop`; a parallel nest of at least `parallelWork` iterations
/// whose values from above all have packed words becomes a call of the
/// host's kiln_parallel_for with site `parallelLoops.size()` (appended).
void outline(Operation *loop, func::FuncOp parent, unsigned index, SymbolTable &symbols,
             int64_t parallelWork, SmallVectorImpl<Attribute> &parallelLoops) {
  llvm::SetVector<Value> above;
  getUsedValuesDefinedAbove(loop->getRegions(), above);
  // The bounds and the steps are operands of the loop, not of its region.
  for (Value v : loop->getOperands())
    above.insert(v);
  SmallVector<Value> arguments, cloned;
  for (Value v : above)
    (isClonable(v) ? cloned : arguments).push_back(v);
  std::string name = (parent.getName() + "_loop" + Twine(index)).str();
  OpBuilder at(loop);
  Location loc = loop->getLoc();

  auto parallel = dyn_cast<scf::ParallelOp>(loop);
  std::optional<int64_t> work = parallel ? iterations(loop) : std::nullopt;
  bool threaded = parallelWork > 0 && work && *work >= parallelWork &&
                  getConstantIntValue(parallel.getStep()[0]) == 1 &&
                  // Only loads, stores and arithmetic: no call (an arena
                  // allocation is per thread) runs on the workers.
                  !loop->walk([](Operation *op) {
                         return isa<CallOpInterface, memref::AllocOp, memref::AllocaOp>(op)
                                    ? WalkResult::interrupt()
                                    : WalkResult::advance();
                       }).wasInterrupted() &&
                  llvm::all_of(arguments, [](Value v) { return hasPackedWords(v.getType()); });
  func::FuncOp func =
      outlinedFunction(loop, parent, name, arguments, cloned, threaded, symbols);
  if (!threaded) {
    func.setPrivate();
    func::CallOp::create(at, loc, func, arguments);
    loop->erase();
    return;
  }
  // Public: the JIT gives it a packed wrapper, _mlir_<name>(void **), which
  // the host calls on each thread's share of the outermost dimension.
  SmallVector<Value> words;
  for (Value v : arguments)
    words.append(packedWords(at, loc, v));
  Value table = hlo_to_linalg::wordTable(at, loc, words);
  Type i64 = at.getI64Type();
  Value site = arith::ConstantIntOp::create(at, loc, int64_t(parallelLoops.size()), 64);
  Value lower = arith::IndexCastOp::create(at, loc, i64, parallel.getLowerBound()[0]);
  Value upper = arith::IndexCastOp::create(at, loc, i64, parallel.getUpperBound()[0]);
  func::CallOp::create(at, loc, kParallelForFunction, TypeRange{},
                       ValueRange{site, lower, upper, table});
  parallelLoops.push_back(FlatSymbolRefAttr::get(func));
  loop->erase();
}

struct OutlineLoopsPass : kiln::impl::OutlineLoopsBase<OutlineLoopsPass> {
  using OutlineLoopsBase::OutlineLoopsBase;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SymbolTable symbols(module);
    SmallVector<func::FuncOp> funcs(module.getOps<func::FuncOp>());
    SmallVector<Attribute> parallelLoops;
    for (func::FuncOp parent : funcs) {
      if (parent.isExternal())
        continue;
      SmallVector<Operation *> loops;
      for (Operation &op : parent.getBody().front())
        if (isa<scf::ForOp, scf::ParallelOp>(op) && op.getNumResults() == 0)
          loops.push_back(&op);
      for (auto [i, loop] : llvm::enumerate(loops))
        outline(loop, parent, unsigned(i), symbols, parallelWork, parallelLoops);
    }
    if (parallelLoops.empty())
      return;
    hlo_to_linalg::declareHostFunction(module, kParallelForFunction, 3);
    module->setAttr(kParallelLoopsAttr, ArrayAttr::get(module.getContext(), parallelLoops));
  }
};

} // namespace
