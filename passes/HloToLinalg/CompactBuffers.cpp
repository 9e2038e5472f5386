//===- CompactBuffers.cpp - kiln-compact-buffers ---------------------------===//
//
// Buffer lifetimes after bufferization: temporaries freed after their last
// use, results computed in their out-parameters (Passes.td says why).
//
//===----------------------------------------------------------------------===//

#include "kiln/Passes/HloToLinalg/Passes.h"
#include "kiln/Dialect/Kiln/IR/StateAliases.h"

#include "mlir/Dialect/Bufferization/Transforms/BufferViewFlowAnalysis.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "llvm/ADT/SetVector.h"

namespace kiln {
#define GEN_PASS_DEF_COMPACTBUFFERS
#include "kiln/Passes/HloToLinalg/Passes.h.inc"
} // namespace kiln

using namespace mlir;

namespace {

/// Out-parameters written by one copy of a buffer the body allocated: the
/// buffer becomes the out-parameter.
void computeResultsInPlace(func::FuncOp func) {
  Block &body = func.getBody().front();
  SmallVector<memref::CopyOp> copies;
  for (auto copy : body.getOps<memref::CopyOp>())
    copies.push_back(copy);
  for (memref::CopyOp copy : copies) {
    auto out = dyn_cast<BlockArgument>(copy.getTarget());
    auto alloc = copy.getSource().getDefiningOp<memref::AllocOp>();
    if (!out || out.getOwner() != &body || !out.hasOneUse() || !alloc ||
        alloc->getBlock() != &body || alloc.getType() != out.getType())
      continue;
    // The buffer's final contents: nothing but copies and frees after.
    bool atEnd = true;
    for (Operation *op = copy->getNextNode(); op && atEnd; op = op->getNextNode())
      atEnd = isa<memref::CopyOp, memref::DeallocOp>(op) || op->hasTrait<OpTrait::IsTerminator>();
    if (!atEnd)
      continue;
    for (Operation *user : llvm::make_early_inc_range(alloc->getUsers()))
      if (isa<memref::DeallocOp>(user))
        user->erase();
    copy.erase();
    alloc.getResult().replaceAllUsesWith(out);
    alloc.erase();
  }
}

/// The ops of `body` that use `buffer`, a view of it or its data pointer
/// (followed through integer ops and the memrefs it is stored into), `skip`
/// aside, in block order.
SmallVector<Operation *> usersIn(Block &body, Value buffer, const BufferViewFlowAnalysis &views,
                                 Operation *skip = nullptr) {
  BufferViewFlowAnalysis::ValueSetT aliases = views.resolve(buffer);
  SmallVector<Value> worklist(aliases.begin(), aliases.end());
  llvm::SmallPtrSet<Value, 16> seen(worklist.begin(), worklist.end());
  llvm::SetVector<Operation *> users;
  auto follow = [&](Value v) {
    if (seen.insert(v).second)
      worklist.push_back(v);
  };
  while (!worklist.empty()) {
    Value v = worklist.pop_back_val();
    for (Operation *user : v.getUsers()) {
      if (user == skip)
        continue;
      if (Operation *top = body.findAncestorOpInBlock(*user))
        users.insert(top);
      if (auto store = dyn_cast<memref::StoreOp>(user)) {
        if (store.getValueToStore() == v)
          for (Value alias : views.resolve(store.getMemRef()))
            follow(alias);
        continue;
      }
      // A pointer or offset computed from the buffer is a use until its
      // own last use.
      for (Value result : user->getResults())
        if (result.getType().isIntOrIndex())
          follow(result);
    }
  }
  SmallVector<Operation *> ordered = users.takeVector();
  llvm::sort(ordered, [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
  return ordered;
}

void freeAfterLastUse(func::FuncOp func) {
  Block &body = func.getBody().front();
  BufferViewFlowAnalysis views(func);
  SmallVector<memref::DeallocOp> deallocs;
  for (auto dealloc : body.getOps<memref::DeallocOp>())
    if (auto alloc = dealloc.getMemref().getDefiningOp<memref::AllocOp>();
        alloc && alloc->getBlock() == &body)
      deallocs.push_back(dealloc);
  for (memref::DeallocOp dealloc : deallocs) {
    SmallVector<Operation *> users = usersIn(body, dealloc.getMemref(), views, dealloc);
    Operation *last = users.empty() ? nullptr : users.back();
    Operation *after = last ? last : dealloc.getMemref().getDefiningOp();
    if (after->isBeforeInBlock(dealloc))
      dealloc->moveAfter(after);
  }
}

/// Whether `op`, both the last reader of `argument` and the first user of
/// `out`, stays correct with the two one buffer: an elementwise linalg op
/// that reads the argument itself (no view) at each point only through
/// the map it writes the out-parameter with, and never reads the
/// out-parameter's old contents.
bool updatesElementwise(Operation *op, Value argument, Value out,
                        const BufferViewFlowAnalysis &views) {
  BufferViewFlowAnalysis::ValueSetT argumentViews = views.resolve(argument),
                                    outViews = views.resolve(out);
  auto linalgOp = dyn_cast<linalg::LinalgOp>(op);
  if (!linalgOp || linalgOp.getNumParallelLoops() != linalgOp.getNumLoops())
    return false;
  OpOperand *init = nullptr;
  for (OpOperand &operand : op->getOpOperands()) {
    Value v = operand.get();
    if (v == out) {
      if (init || !linalgOp.isDpsInit(&operand) || linalgOp.payloadUsesValueFromOperand(&operand))
        return false;
      init = &operand;
    } else if (v != argument &&
               (argumentViews.contains(v) || outViews.contains(v))) {
      return false;
    }
  }
  if (!init)
    return false;
  AffineMap written = linalgOp.getMatchingIndexingMap(init);
  for (OpOperand &operand : op->getOpOperands())
    if (operand.get() == argument &&
        (linalgOp.isDpsInit(&operand) || linalgOp.getMatchingIndexingMap(&operand) != written))
      return false;
  return true;
}

/// The out-parameters the caller may pass the buffer of the argument whose
/// state they update (kInputOutputAliasAttr): those whose argument is read
/// for the last time before the out-parameter's first use, or by that use
/// itself when updatesElementwise. Recorded as kOutParamBuffersAttr.
void shareStateBuffers(func::FuncOp func) {
  auto aliases = func->getAttrOfType<DenseI64ArrayAttr>(kiln::kInputOutputAliasAttr);
  if (!aliases)
    return;
  func->removeAttr(kiln::kInputOutputAliasAttr);
  Block &body = func.getBody().front();
  int64_t outs = aliases.size(), first = int64_t(body.getNumArguments()) - outs;
  if (func.getNumResults() || first < 0)
    return; // not bufferized with out-parameters: nothing to share
  BufferViewFlowAnalysis views(func);
  SmallVector<int64_t> shared(outs, -1);
  for (auto [k, a] : llvm::enumerate(aliases.asArrayRef())) {
    if (a < 0 || a >= first)
      continue;
    Value argument = body.getArgument(unsigned(a)), out = body.getArgument(unsigned(first + k));
    if (argument.getType() != out.getType())
      continue;
    SmallVector<Operation *> writes = usersIn(body, out, views);
    SmallVector<Operation *> reads = usersIn(body, argument, views);
    if (writes.empty())
      continue;
    Operation *firstWrite = writes.front();
    bool safe = llvm::all_of(reads, [&](Operation *read) {
      return read->isBeforeInBlock(firstWrite) ||
             (read == firstWrite && updatesElementwise(read, argument, out, views));
    });
    if (safe)
      shared[k] = a;
  }
  func->setAttr(kiln::kOutParamBuffersAttr, DenseI64ArrayAttr::get(func.getContext(), shared));
}

struct CompactBuffersPass : kiln::impl::CompactBuffersBase<CompactBuffersPass> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (func.isExternal())
      return;
    computeResultsInPlace(func);
    freeAfterLastUse(func);
    shareStateBuffers(func);
  }
};

} // namespace
