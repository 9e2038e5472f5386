//===- Collective.cpp - Collectives of a per-rank program and their cost --===//

#include "kiln/Planner/Collective.h"
#include "kiln/Dialect/Kiln/IR/KilnOps.h"
#include "kiln/Dialect/Kiln/IR/Sharding.h"
#include "kiln/Planner/Precision.h"

#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/BuiltinOps.h"

#include <algorithm>
#include <limits>

using namespace mlir;

namespace kiln {

const char *collectiveKindName(CollectiveKind kind) {
  switch (kind) {
  case CollectiveKind::AllGather:
    return "all_gather";
  case CollectiveKind::ReduceScatter:
    return "reduce_scatter";
  case CollectiveKind::AllReduce:
    return "all_reduce";
  case CollectiveKind::AllToAll:
    return "all_to_all";
  case CollectiveKind::Local:
    return "local";
  }
  return "local";
}

std::optional<Collective> describeCollective(Operation *op, const ValuePrecision *precision) {
  auto axesAttr = op->getAttrOfType<DenseI16ArrayAttr>("grid_axes");
  if (!axesAttr || !isa<shard::ShardDialect>(op->getDialect()))
    return std::nullopt;
  auto module = op->getParentOfType<ModuleOp>();
  auto grid = module ? module.lookupSymbol<shard::GridOp>("grid") : nullptr;
  if (!grid)
    return std::nullopt;
  llvm::SmallVector<std::string> names = gridAxisNames(module);
  Collective c;
  for (auto [i, a] : llvm::enumerate(axesAttr.asArrayRef())) {
    c.axes += (i ? "+" : "") + (size_t(a) < names.size() ? names[a] : std::to_string(a));
    c.groupSize *= grid.getShape()[a];
  }
  auto bytesOf = [&](ValueRange values) {
    return precision ? precision->bytes(values) : tensorBytes(values.getTypes());
  };
  int64_t in = bytesOf(op->getOperands()), out = bytesOf(op->getResults());
  int64_t n = c.groupSize;
  if (isa<shard::AllGatherOp>(op)) {
    c.kind = CollectiveKind::AllGather;
    c.messageBytes = out;
  } else if (isa<shard::ReduceScatterOp>(op)) {
    c.kind = CollectiveKind::ReduceScatter;
    c.messageBytes = in;
  } else if (isa<shard::AllReduceOp>(op)) {
    c.kind = CollectiveKind::AllReduce;
    c.messageBytes = in;
  } else if (isa<shard::AllToAllOp>(op)) {
    c.kind = CollectiveKind::AllToAll;
    c.messageBytes = in;
  } else {
    c.kind = CollectiveKind::Local; // all_slice and the like: no traffic
    c.messageBytes = in;
  }
  if (n > 1 && c.kind != CollectiveKind::Local) {
    int64_t passes = c.kind == CollectiveKind::AllReduce ? 2 : 1;
    c.bytesSent = passes * c.messageBytes * (n - 1) / n;
    c.steps = passes * (n - 1);
  }
  return c;
}

GroupPlacement placeGroup(ArrayRef<int64_t> gridShape, ArrayRef<int16_t> axes,
                          const TargetProfile &target) {
  // Ranks of rank 0's group: every combination of coordinates along `axes`.
  std::vector<int64_t> ranks{0};
  for (int16_t axis : axes) {
    int64_t stride = 1;
    for (size_t a = axis + 1; a < gridShape.size(); ++a)
      stride *= gridShape[a];
    std::vector<int64_t> next;
    for (int64_t base : ranks)
      for (int64_t k = 0; k < gridShape[axis]; ++k)
        next.push_back(base + k * stride);
    ranks = std::move(next);
  }
  auto distinct = [&](int64_t unit) {
    std::vector<int64_t> units;
    units.reserve(ranks.size());
    for (int64_t r : ranks)
      units.push_back(r / unit);
    std::sort(units.begin(), units.end());
    return int64_t(std::unique(units.begin(), units.end()) - units.begin());
  };
  GroupPlacement p;
  p.nodes = distinct(target.ranksPerNode);
  p.membersPerNode = int64_t(ranks.size()) / p.nodes;
  p.membersPerDevice = int64_t(ranks.size()) / distinct(target.ranksPerDevice);
  return p;
}

double ringSeconds(int64_t steps, int64_t bytesSent, double latencySeconds, double bandwidth) {
  return double(steps) * latencySeconds + double(bytesSent) / bandwidth;
}

namespace {

/// The links of a placed group: each rank's share of its device's links (β
/// inside a node) and of its node's network, and their latencies.
struct GroupLinks {
  double intraBandwidth, intraLatency, nodeNetwork, interLatency;

  static GroupLinks of(const GroupPlacement &placement, const TargetProfile &target) {
    double deviceShare =
        std::min(1.0, double(placement.membersPerDevice) / double(target.ranksPerDevice));
    double nodeShare =
        std::min(1.0, double(placement.membersPerNode) / double(target.ranksPerNode));
    double eff = target.efficiency.collective;
    return {target.intraNode.bandwidth * deviceShare * eff, target.intraNode.latencySeconds,
            target.interNode.bandwidth * nodeShare * eff, target.interNode.latencySeconds};
  }
};

/// A ring over every member: across nodes each step waits on the network's
/// latency and every rank's stream on the slower of its device's share and
/// the node's network (NCCL's channels spread a ring over the node's NICs).
double flatRingSeconds(const Collective &c, const GroupPlacement &placement,
                       const GroupLinks &links) {
  double bandwidth = links.intraBandwidth, latency = links.intraLatency;
  if (placement.nodes > 1) {
    bandwidth = std::min(bandwidth, links.nodeNetwork);
    latency = std::max(latency, links.interLatency);
  }
  return ringSeconds(c.steps, c.bytesSent, latency, bandwidth);
}

/// Two levels: rings inside each node over its m members, and rings across
/// the N nodes between the members with the same place in their node, each
/// carrying 1/m of the data while the node's m members share its network.
/// all_reduce: reduce-scatter in the node, all-reduce across, all-gather in
/// the node; reduce_scatter: in the node, then across; all_gather: across,
/// then in the node.
double twoLevelSeconds(const Collective &c, const GroupPlacement &placement,
                       const GroupLinks &links) {
  const int64_t m = placement.membersPerNode, nodes = placement.nodes;
  const double s = double(c.messageBytes);
  const double perRankNetwork = links.nodeNetwork / double(m);
  auto inNode = [&](double bytes) { // one ring pass over the node's members
    return double(m - 1) * links.intraLatency + double(m - 1) / double(m) * bytes / links.intraBandwidth;
  };
  auto acrossNodes = [&](double bytes, int64_t passes) {
    return double(passes * (nodes - 1)) * links.interLatency +
           double(passes * (nodes - 1)) / double(nodes) * bytes / perRankNetwork;
  };
  switch (c.kind) {
  case CollectiveKind::AllReduce:
    return 2 * inNode(s) + acrossNodes(s / double(m), 2);
  case CollectiveKind::ReduceScatter:
  case CollectiveKind::AllGather:
    return inNode(s) + acrossNodes(s / double(m), 1);
  default:
    return std::numeric_limits<double>::infinity();
  }
}

} // namespace

CollectiveTime collectiveTime(const Collective &c, const GroupPlacement &placement,
                              const TargetProfile &target) {
  if (c.kind == CollectiveKind::Local || c.groupSize < 2)
    return {};
  GroupLinks links = GroupLinks::of(placement, target);
  CollectiveTime t{flatRingSeconds(c, placement, links), CollectiveAlgorithm::Ring};
  // Across nodes with several members per node, the two-level algorithm
  // trades the flat ring's n-1 network-latency steps for m-1 + N-1 shorter
  // ones at nearly the same bytes: the faster one is used (as NCCL's tuner
  // picks by size).
  if (placement.nodes > 1 && placement.membersPerNode > 1) {
    double twoLevel = twoLevelSeconds(c, placement, links);
    if (twoLevel < t.seconds)
      t = {twoLevel, CollectiveAlgorithm::TwoLevel};
  }
  return t;
}

double sendSeconds(int64_t bytes, const GroupPlacement &placement, const TargetProfile &target) {
  if (bytes == 0)
    return 0;
  Collective send;
  send.kind = CollectiveKind::AllGather; // any kind: one flat-ring step
  send.groupSize = 2;
  send.messageBytes = send.bytesSent = bytes;
  send.steps = 1;
  return flatRingSeconds(send, placement, GroupLinks::of(placement, target));
}

double collectiveSeconds(const Collective &c, const GroupPlacement &placement,
                         const TargetProfile &target) {
  return collectiveTime(c, placement, target).seconds;
}

} // namespace kiln
