//===- CompactBuffers.cpp - kiln-compact-buffers ---------------------------===//
//
// Buffer lifetimes after bufferization: temporaries freed after their last
// use, results computed in their out-parameters (Passes.td says why).
//
//===----------------------------------------------------------------------===//

#include "kiln/Passes/HloToLinalg/Passes.h"

#include "mlir/Dialect/Bufferization/Transforms/BufferViewFlowAnalysis.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

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

/// The op of `body` holding the last use of `buffer`, its views and its
/// data pointer (followed through integer ops and the memrefs it is stored
/// into), or null when there is none.
Operation *lastUseIn(Block &body, Value buffer, const BufferViewFlowAnalysis &views,
                     Operation *dealloc) {
  BufferViewFlowAnalysis::ValueSetT aliases = views.resolve(buffer);
  SmallVector<Value> worklist(aliases.begin(), aliases.end());
  llvm::SmallPtrSet<Value, 16> seen(worklist.begin(), worklist.end());
  Operation *last = nullptr;
  auto follow = [&](Value v) {
    if (seen.insert(v).second)
      worklist.push_back(v);
  };
  while (!worklist.empty()) {
    Value v = worklist.pop_back_val();
    for (Operation *user : v.getUsers()) {
      if (user == dealloc)
        continue;
      Operation *top = body.findAncestorOpInBlock(*user);
      if (top && (!last || last->isBeforeInBlock(top)))
        last = top;
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
  return last;
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
    Operation *last = lastUseIn(body, dealloc.getMemref(), views, dealloc);
    Operation *after = last ? last : dealloc.getMemref().getDefiningOp();
    if (after->isBeforeInBlock(dealloc))
      dealloc->moveAfter(after);
  }
}

struct CompactBuffersPass : kiln::impl::CompactBuffersBase<CompactBuffersPass> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (func.isExternal())
      return;
    computeResultsInPlace(func);
    freeAfterLastUse(func);
  }
};

} // namespace
