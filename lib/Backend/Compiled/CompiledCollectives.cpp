//===- CompiledCollectives.cpp - A compiled step's collectives on the grid ===//

#include "kiln/Backend/Compiled/CompiledCollectives.h"
#include "kiln/Dialect/Hlo/IR/HloOps.h"
#include "kiln/Dialect/Hlo/IR/ReplicaGroups.h"
#include "kiln/Passes/HloToLinalg/HostCalls.h"
#include "kiln/Support/Error.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinOps.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cstring>
#include <optional>

namespace kiln {
namespace {

std::string describeSite(mlir::Operation *op) {
  std::string where = "'" + op->getName().getStringRef().str() + "'";
  if (auto name = mlir::dyn_cast<mlir::NameLoc>(op->getLoc()))
    where += " (from " + name.getName().str() + ")";
  return where;
}

std::string groupsText(mlir::DenseIntElementsAttr groups) {
  std::vector<int64_t> ids(groups.getValues<int64_t>().begin(), groups.getValues<int64_t>().end());
  int64_t size = groups.getType().getShape().back();
  std::string text;
  for (size_t i = 0; i < ids.size() && i < 64; ++i)
    text += (i % size == 0 ? (i ? "},{" : "{") : ",") + std::to_string(ids[i]);
  return text + (ids.size() > 64 ? ",...}" : "}");
}

std::string gridText(const DeviceGrid &grid) {
  std::string text;
  for (size_t a = 0; a < grid.shape().size(); ++a)
    text += (a ? " x " : "") + grid.axisNames()[a] + " " + std::to_string(grid.shape()[a]);
  return text;
}

} // namespace

std::vector<CompiledCollective> bindCollectives(mlir::ModuleOp hloStep, const DeviceGrid *grid) {
  std::vector<CompiledCollective> bound;
  llvm::DenseMap<mlir::Attribute, std::optional<std::vector<int16_t>>> axesByGroups;
  for (mlir::Operation *op : numberCollectiveSites(hloStep)) {
    CompiledCollective c;
    c.where = describeSite(op);
    for (mlir::Value v : op->getOperands())
      c.operands.push_back(FunctionSignature::signatureOf(v.getType(), c.where));
    c.result = FunctionSignature::signatureOf(op->getResult(0).getType(), c.where);
    if (mlir::isa<hlo::ReplicaIdOp>(op)) {
      c.kind = CompiledCollective::Kind::ReplicaId;
      bound.push_back(std::move(c));
      continue;
    }
    std::optional<hlo::Combiner> combiner;
    llvm::TypeSwitch<mlir::Operation *>(op)
        .Case([&](hlo::AllGatherOp g) {
          c.kind = CompiledCollective::Kind::AllGather;
          c.dim = int64_t(g.getAllGatherDim());
        })
        .Case([&](hlo::ReduceScatterOp s) {
          c.kind = CompiledCollective::Kind::ReduceScatter;
          c.dim = int64_t(s.getScatterDimension());
          combiner = s.getCombiner();
        })
        .Case([&](hlo::AllReduceOp r) {
          c.kind = CompiledCollective::Kind::AllReduce;
          combiner = r.getCombiner();
        })
        .Case([&](hlo::AllToAllOp a) {
          c.kind = CompiledCollective::Kind::AllToAll;
          c.dim = int64_t(a.getSplitDimension());
        });
    if (combiner) {
      switch (*combiner) {
      case hlo::Combiner::add:
        c.reduction = Reduction::Sum;
        break;
      case hlo::Combiner::max:
        c.reduction = Reduction::Max;
        break;
      case hlo::Combiner::min:
        c.reduction = Reduction::Min;
        break;
      case hlo::Combiner::mul:
        fail("compiled mode: {} multiplies over its group; the grid's collectives add, take "
             "the maximum or the minimum",
             c.where);
      }
    }
    // MPI compares i32 as signed: a u32 maximum or minimum would not be one.
    if (combiner && (c.reduction == Reduction::Max || c.reduction == Reduction::Min) &&
        mlir::cast<mlir::RankedTensorType>(op->getResult(0).getType())
            .getElementType()
            .isUnsignedInteger())
      fail("compiled mode: {} takes the maximum or minimum of unsigned values; the grid's "
           "collectives compare signed integers",
           c.where);
    auto groups = op->getAttrOfType<mlir::DenseIntElementsAttr>("replica_groups");
    if (!grid)
      fail("compiled mode: {} is a collective among ranks {}: a step of several ranks runs on "
           "them, under mpiexec (kiln train --compile.enable=true); alone it runs one rank",
           c.where, groupsText(groups));
    if (op->hasAttr("channel_id"))
      fail("compiled mode: {} has a channel_id: its groups are partition or global ids, and "
           "compiled mode runs Kiln's cross-replica collectives (replica groups alone)",
           c.where);
    auto [it, inserted] = axesByGroups.try_emplace(groups);
    if (inserted) {
      std::vector<int64_t> ids(groups.getValues<int64_t>().begin(),
                               groups.getValues<int64_t>().end());
      it->second = hlo::gridAxesOf(grid->shape(), ids, groups.getType().getShape().front());
    }
    if (!it->second)
      fail("compiled mode: {} runs among ranks {}, which are not the groups of any set of the "
           "grid's axes ({}): the step was built for another layout",
           c.where, groupsText(groups), gridText(*grid));
    c.axes = *it->second;
    bound.push_back(std::move(c));
  }
  return bound;
}

void runCollective(const CompiledCollective &c, DeviceGrid *grid, const int64_t *table) {
  void *out = reinterpret_cast<void *>(table[c.operands.size()]);
  if (c.kind == CompiledCollective::Kind::ReplicaId) {
    auto rank = int32_t(grid ? grid->rank() : 0);
    std::memcpy(out, &rank, sizeof rank);
    return;
  }
  if (!grid)
    fail("{} needs the grid of its ranks", c.where);
  const TensorSignature &in = c.operands.front();
  Tensor operand(in.dtype, in.shape, nullptr, reinterpret_cast<const void *>(table[0]));
  Tensor result;
  switch (c.kind) {
  case CompiledCollective::Kind::AllGather:
    result = grid->allGather(operand, c.axes, c.dim);
    break;
  case CompiledCollective::Kind::ReduceScatter:
    result = grid->reduceScatter(operand, c.axes, c.dim, c.reduction);
    break;
  case CompiledCollective::Kind::AllReduce:
    result = grid->allReduce(operand, c.axes, c.reduction);
    break;
  case CompiledCollective::Kind::AllToAll:
    result = grid->allToAll(operand, c.axes, c.dim, c.dim);
    break;
  case CompiledCollective::Kind::ReplicaId:
    break;
  }
  if (result.shape() != c.result.shape || result.dtype() != c.result.dtype)
    fail("{}: the grid's result is {}, the op's {}", c.where, shapeToString(result.shape()),
         shapeToString(c.result.shape));
  std::memcpy(out, result.rawData(), result.nbytes());
}

} // namespace kiln
