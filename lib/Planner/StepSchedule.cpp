//===- StepSchedule.cpp - Predicted timeline of a per-rank step -----------===//

#include "kiln/Planner/StepSchedule.h"
#include "kiln/Dialect/Kiln/IR/KilnOps.h"
#include "kiln/Dialect/Kiln/IR/Recomputed.h"
#include "kiln/Planner/ModulePath.h"
#include "kiln/Planner/Precision.h"
#include "kiln/Support/Error.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/BuiltinOps.h"

#include "llvm/ADT/DenseMap.h"

#include <map>
#include <algorithm>
#include <limits>
#include <queue>

using namespace mlir;

namespace kiln {

const char *opClassName(OpClass opClass) {
  switch (opClass) {
  case OpClass::Matmul:
    return "matmul";
  case OpClass::Attention:
    return "attention";
  case OpClass::Vector:
    return "vector";
  }
  return "vector";
}

double rooflineSeconds(double flops, int64_t bytes, OpClass opClass,
                       const TargetProfile &target, bool *memoryBound) {
  double compute = flops / target.achievedFlops(opClass);
  double memory = double(bytes) / target.achievedMemoryBandwidth();
  if (memoryBound)
    *memoryBound = memory > compute;
  if (flops == 0 && bytes == 0)
    return 0;
  return std::max(compute, memory) + target.efficiency.opOverheadSeconds;
}

namespace {

StringRef fqnOf(Operation *op) {
  if (auto fqn = op->getAttrOfType<StringAttr>("fqn"))
    return fqn.getValue();
  return {};
}

/// Bytes an op reads and writes at the target's precision: its cost
/// interface's bytes, scaled by how its operands' (results') bytes change
/// from IR types to `precision`.
int64_t scaledBytes(CostOpInterface cost, const ValuePrecision &precision) {
  Operation *op = cost.getOperation();
  auto scale = [](int64_t bytes, int64_t target, int64_t ir) {
    return ir == 0 ? bytes : int64_t(double(bytes) * double(target) / double(ir));
  };
  return scale(cost.getBytesRead(), precision.bytes(op->getOperands()),
               tensorBytes(op->getOperandTypes())) +
         scale(cost.getBytesWritten(), precision.bytes(op->getResults()),
               tensorBytes(op->getResultTypes()));
}

/// On a target that times GEMMs by shape, an op that reports its GEMMs
/// takes their measured seconds (which move its operands and results), the
/// roofline of the rest of its work as vector work (the FLOPs beyond its
/// GEMMs and the bytes beyond its operands and results: a fused loss's
/// softmax over its logits) and the per-op overhead; nullopt otherwise.
std::optional<double> timedGemmSeconds(CostOpInterface cost, double flops,
                                       const TargetProfile &target) {
  if (!target.gemmSeconds)
    return std::nullopt;
  llvm::SmallVector<GemmShape> gemms;
  cost.getGemms(gemms);
  if (gemms.empty())
    return std::nullopt;
  double seconds = 0, gemmFlops = 0;
  for (const GemmShape &g : gemms) {
    seconds += double(g.count) * target.gemmSeconds(g, target.ranksPerNode);
    gemmFlops += g.flops();
  }
  Operation *op = cost.getOperation();
  int64_t restBytes = cost.getBytesRead() + cost.getBytesWritten() -
                      tensorBytes(op->getOperandTypes()) - tensorBytes(op->getResultTypes());
  double rest = std::max(std::max(0.0, flops - gemmFlops) / target.achievedFlops(OpClass::Vector),
                         double(std::max<int64_t>(0, restBytes)) /
                             target.achievedMemoryBandwidth());
  return seconds + rest + target.efficiency.opOverheadSeconds;
}

/// The bytes of casting `op`'s two GEMM operands to float8 where `op` is a
/// linear's GEMM that torchtitan's float8 converter runs in float8 (its
/// fqn in no filter, the weight's dimensions multiples of 16 as torchao
/// requires; the weight gradient's GEMM stays bf16 under
/// rowwise_with_gw_hp); nullopt otherwise. Each operand is scaled and cast
/// from bf16 first, as eager torchao does: a pass for its amax (2 bytes an
/// element) and one casting it (2 read, 1 written).
std::optional<int64_t> float8CastBytes(Operation *op, const ValuePrecision &precision) {
  const PrecisionPolicy::Float8Linears &f8 = precision.float8();
  if (!f8.enabled || !isa<LinearOp, LinearBackwardDataOp, LinearBackwardWeightOp>(op))
    return std::nullopt;
  if (f8.weightGradientHighPrecision && isa<LinearBackwardWeightOp>(op))
    return std::nullopt;
  StringRef fqn = fqnOf(op);
  for (const std::string &filter : f8.filterFqns)
    if (fqn.contains(filter))
      return std::nullopt;
  auto weight = cast<RankedTensorType>(
      isa<LinearBackwardWeightOp>(op) ? op->getResult(0).getType() : op->getOperand(1).getType());
  if (llvm::any_of(weight.getShape(), [](int64_t d) { return d % 16 != 0; }))
    return std::nullopt;
  int64_t elements = 0;
  for (Value operand : op->getOperands().take_front(2))
    elements += cast<RankedTensorType>(operand.getType()).getNumElements();
  return 5 * elements;
}

struct Node {
  Operation *op;
  bool communication = false;
  double seconds = 0;
  double start = 0, end = 0;
  bool scheduled = false;
  int pending = 0;           ///< unscheduled ops it waits for (communication)
  double release = 0;        ///< earliest start from dependencies scheduled so far
  llvm::SmallVector<unsigned> dependents; ///< communication ops waiting for it
  ScheduledOp record;
};

} // namespace

StepSchedule scheduleStep(func::FuncOp fn, const TargetProfile &target,
                          const ValuePrecision &precision) {
  Block &body = fn.getBody().front();
  auto module = fn->getParentOfType<ModuleOp>();
  auto grid = module ? module.lookupSymbol<shard::GridOp>("grid") : nullptr;
  llvm::SmallVector<int64_t> gridShape;
  if (grid)
    gridShape.assign(grid.getShape().begin(), grid.getShape().end());

  std::vector<Node> nodes;
  llvm::DenseMap<Operation *, unsigned> index;
  for (Operation &op : body.without_terminator()) {
    index[&op] = nodes.size();
    nodes.push_back(Node{&op});
  }

  // Cost every op; modules in program order for the prefetch rule.
  std::vector<int> segmentOf(nodes.size(), -1);
  std::vector<unsigned> segmentFirst; // first compute op of each module run
  std::string lastKey;
  std::map<std::vector<int16_t>, GroupPlacement> placements;
  for (unsigned i = 0; i < nodes.size(); ++i) {
    Node &n = nodes[i];
    Operation *op = n.op;
    n.record.name = op->getName().getStringRef().str();
    n.record.op = op;
    n.record.fqn = fqnOf(op).str();
    if (std::optional<Collective> c = describeCollective(op, &precision)) {
      // Without overlap a collective runs inline, in program order, as the
      // compute ops do.
      n.communication = target.overlapCommunication;
      n.record.stream = ScheduledOp::Stream::Communication;
      auto axes = op->getAttrOfType<DenseI16ArrayAttr>("grid_axes").asArrayRef();
      // A step's collectives run over a few sets of axes; placing a group
      // walks its ranks, as many as the world for FSDP.
      std::vector<int16_t> key(axes.begin(), axes.end());
      auto placed = placements.find(key);
      if (placed == placements.end())
        placed = placements.emplace(key, placeGroup(gridShape, axes, target)).first;
      CollectiveTime time = collectiveTime(*c, placed->second, target);
      n.seconds = time.seconds;
      n.record.algorithm = time.algorithm;
      n.record.collective = c;
      continue;
    }
    if (auto cost = dyn_cast<CostOpInterface>(op)) {
      n.record.opClass = cost.getOpClass();
      n.record.flops = cost.getFlops();
      n.record.bytes = scaledBytes(cost, precision);
      std::optional<double> timed = timedGemmSeconds(cost, n.record.flops, target);
      n.record.gemmsTimed = timed.has_value();
      if (std::optional<int64_t> casts = float8CastBytes(op, precision)) {
        // The GEMM at the Float8 rate, after its operands' casts.
        n.record.float8 = true;
        double gemm = n.record.flops / (target.float8PeakFlops * target.efficiency.matmul);
        double memory = double(n.record.bytes) / target.achievedMemoryBandwidth();
        n.record.memoryBound = memory > gemm;
        n.seconds = std::max(gemm, memory) + double(*casts) / target.achievedMemoryBandwidth() +
                    target.efficiency.opOverheadSeconds;
      } else {
        n.seconds = timed ? *timed
                          : rooflineSeconds(n.record.flops, n.record.bytes, n.record.opClass,
                                            target, &n.record.memoryBound);
      }
    }
    if (!n.record.fqn.empty()) {
      std::string key = moduleKey(n.record.fqn);
      if (segmentFirst.empty() || key != lastKey) {
        segmentFirst.push_back(i);
        lastKey = key;
      }
    }
    segmentOf[i] = segmentFirst.empty() ? -1 : int(segmentFirst.size()) - 1;
  }

  // Dependencies of the communication ops: their operands' producers and,
  // for a parameter's all-gather, the op that opens the module before.
  auto addDependency = [&](unsigned from, unsigned to) {
    nodes[from].dependents.push_back(to);
    ++nodes[to].pending;
  };
  for (unsigned i = 0; i < nodes.size(); ++i) {
    Node &n = nodes[i];
    if (!n.communication)
      continue;
    bool ofArgument = false;
    for (Value operand : n.op->getOperands()) {
      if (Operation *def = operand.getDefiningOp())
        addDependency(index[def], i);
      else
        ofArgument = true;
    }
    if (ofArgument && isa<shard::AllGatherOp>(n.op)) {
      Operation *consumer = nullptr;
      for (Operation *user : n.op->getUsers())
        if (user->getBlock() == &body && (!consumer || user->isBeforeInBlock(consumer)))
          consumer = user;
      if (consumer && segmentOf[index[consumer]] > 0) {
        unsigned anchor = segmentFirst[segmentOf[index[consumer]] - 1];
        if (anchor < i)
          addDependency(anchor, i);
      }
      if (consumer && n.record.fqn.empty())
        n.record.fqn = fqnOf(consumer).str();
    }
    if (n.record.fqn.empty())
      if (Operation *def = n.op->getNumOperands() ? n.op->getOperand(0).getDefiningOp() : nullptr)
        n.record.fqn = fqnOf(def).str();
  }

  auto readyTime = [&](Operation *op) {
    double ready = 0;
    for (Value operand : op->getOperands())
      if (Operation *def = operand.getDefiningOp()) {
        const Node &producer = nodes[index[def]];
        if (!producer.scheduled)
          return std::numeric_limits<double>::infinity();
        ready = std::max(ready, producer.end);
      }
    return ready;
  };

  // Released communication ops by (release time, program order).
  using Entry = std::pair<double, unsigned>;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> released;
  auto finish = [&](unsigned i, double start) {
    Node &n = nodes[i];
    n.scheduled = true;
    n.start = start;
    n.end = start + n.seconds;
    for (unsigned d : n.dependents) {
      Node &dependent = nodes[d];
      // An all-gather's anchor releases it when the anchor starts; operands
      // when they end.
      bool isOperand = llvm::any_of(dependent.op->getOperands(),
                                    [&](Value v) { return v.getDefiningOp() == n.op; });
      dependent.release = std::max(dependent.release, isOperand ? n.end : n.start);
      if (--dependent.pending == 0)
        released.push({dependent.release, d});
    }
  };
  for (unsigned i = 0; i < nodes.size(); ++i)
    if (nodes[i].communication && nodes[i].pending == 0)
      released.push({0.0, i});

  StepSchedule schedule;
  double computeFree = 0, commFree = 0;
  unsigned next = 0; // next compute op in program order
  auto skipCommunication = [&] {
    while (next < nodes.size() && nodes[next].communication)
      ++next;
  };
  skipCommunication();
  const double inf = std::numeric_limits<double>::infinity();
  while (next < nodes.size() || !released.empty()) {
    double computeStart = inf;
    if (next < nodes.size()) {
      double ready = readyTime(nodes[next].op);
      computeStart = nodes[next].seconds > 0 ? std::max(ready, computeFree) : ready;
    }
    double commStart = released.empty() ? inf : std::max(commFree, released.top().first);
    if (!released.empty() && commStart <= computeStart) {
      unsigned i = released.top().second;
      released.pop();
      finish(i, commStart);
      commFree = nodes[i].end;
      schedule.communicationSeconds += nodes[i].seconds;
    } else if (computeStart < inf) {
      finish(next, computeStart);
      if (nodes[next].seconds > 0)
        computeFree = nodes[next].end;
      (nodes[next].record.collective ? schedule.communicationSeconds : schedule.computeSeconds) +=
          nodes[next].seconds;
      schedule.flops += nodes[next].record.flops;
      if (isRecomputed(nodes[next].op)) {
        schedule.recomputeSeconds += nodes[next].seconds;
        schedule.recomputeFlops += nodes[next].record.flops;
      }
      if (nodes[next].record.float8) {
        ++schedule.float8Gemms;
        schedule.float8Flops += nodes[next].record.flops;
        schedule.float8Seconds += nodes[next].seconds;
      }
      ++next;
      skipCommunication();
    } else {
      fail("planner: @{} cannot be scheduled: {} waits for a collective that never becomes "
           "ready",
           fn.getName().str(), nodes[next].record.name);
    }
  }
  for (Node &n : nodes) {
    schedule.seconds = std::max(schedule.seconds, n.end);
    if (n.seconds > 0) {
      n.record.start = n.start;
      n.record.seconds = n.seconds;
      schedule.ops.push_back(std::move(n.record));
    }
  }
  return schedule;
}

} // namespace kiln
