//===- ParallelLayout.cpp - Degrees of parallelism, resolved --------------===//

#include "kiln/Driver/ParallelLayout.h"
#include "kiln/Support/Error.h"

namespace kiln {

ParallelLayout ParallelLayout::resolve(const TrainConfig::Parallelism &o,
                                       const Qwen3Config &model, int64_t seqLen,
                                       int64_t launchedWorld) {
  if (o.worldSize > 0 && launchedWorld > 1 && o.worldSize != launchedWorld)
    fail("parallelism.world_size={} but the launcher started {} ranks", o.worldSize,
         launchedWorld);
  int64_t world = o.worldSize > 0 ? o.worldSize : launchedWorld;
  // Each degree bounded first, so their products below fit in 128 bits (a
  // 64-bit product wrapped: 7 x 7905747460161236407 ran as one rank).
  for (auto [field, value] : {std::pair<const char *, int64_t>{"world_size", world},
                              {"data_parallel_replicate_degree", o.dataParallelReplicateDegree},
                              {"data_parallel_shard_degree", o.dataParallelShardDegree},
                              {"tensor_parallel_degree", o.tensorParallelDegree},
                              {"expert_parallel_degree", o.expertParallelDegree}})
    if (value > kMaxRanks)
      fail("parallelism.{}={} is more than the {} ranks (2^24) Kiln lays out", field, value,
           kMaxRanks);

  ParallelLayout l;
  l.dpReplicate = o.dataParallelReplicateDegree;
  l.tp = o.tensorParallelDegree;
  l.reshardAfterForward = o.fsdpReshardAfterForward;
  if (o.dataParallelShardDegree == -1) {
    int64_t others = l.dpReplicate * l.tp;
    if (world % others)
      fail("parallelism: data_parallel_replicate_degree ({}) x tensor_parallel_degree ({}) "
           "= {} does not divide the world of {} ranks, so data_parallel_shard_degree=-1 "
           "has no value",
           l.dpReplicate, l.tp, others, world);
    l.dpShard = world / others;
  } else {
    l.dpShard = o.dataParallelShardDegree;
  }
  __int128 product = __int128(l.dpReplicate) * l.dpShard * l.tp;
  if (product != world)
    fail("parallelism: data_parallel_replicate_degree x data_parallel_shard_degree x "
         "tensor_parallel_degree = {} x {} x {} = {:.0f}, but the world has {} ranks",
         l.dpReplicate, l.dpShard, l.tp, double(product), world);

  for (auto [field, value] : {std::pair<const char *, int64_t>{"num_attention_heads",
                                                               model.numHeads},
                              {"num_key_value_heads", model.numKvHeads},
                              {"vocab_size", model.vocabSize}})
    if (value % l.tp)
      fail("parallelism.tensor_parallel_degree={} must divide {}={} of {}{}", l.tp, field,
           value, model.name,
           std::string(field) == "vocab_size" ? " (Kiln does not pad the vocabulary)" : "");
  l.ep = o.expertParallelDegree;
  if (l.ep > 1) {
    if (!model.isMoe() || model.numSparseLayers() == 0)
      fail("parallelism.expert_parallel_degree={} needs a MoE model; {} has no expert layers",
           l.ep, model.name);
    if (l.dpShard % l.ep)
      fail("parallelism.expert_parallel_degree={} must divide data_parallel_shard_degree={} "
           "(expert parallelism borrows its ranks from dp_shard)",
           l.ep, l.dpShard);
    if (model.numExperts % l.ep)
      fail("parallelism.expert_parallel_degree={} must divide num_experts={} of {}", l.ep,
           model.numExperts, model.name);
  }
  l.expertDispatch = o.expertDispatch;
  l.capacityFactor = o.expertCapacityFactor;
  if (l.expertDispatch == ExpertDispatcher::AllToAll &&
      (!model.isMoe() || model.numSparseLayers() == 0))
    fail("parallelism.expert_dispatch=all_to_all needs a MoE model; {} has no expert layers",
         model.name);
  l.sequenceParallel = o.enableSequenceParallel && l.tp > 1;
  if (l.sequenceParallel && seqLen % l.tp)
    fail("training.seq_len={} must be divisible by parallelism.tensor_parallel_degree={} "
         "under sequence parallelism (parallelism.enable_sequence_parallel=true)",
         seqLen, l.tp);
  return l;
}

std::string ParallelLayout::expertsSummary() const {
  std::string text = ep > 1 ? fmt::format("experts over ep {} of dp_shard", ep) : "";
  if (expertDispatch == ExpertDispatcher::AllToAll)
    text += fmt::format("{}tokens to the experts by all-to-all ({})", text.empty() ? "" : ", ",
                        capacityFactor > 0 ? fmt::format("capacity factor {}", capacityFactor)
                                           : std::string("dropless capacity"));
  return text;
}

std::vector<std::string> ParallelLayout::axisNames() const {
  if (ep > 1)
    return {"dp_replicate", "dp_shard", "ep", "tp"};
  return {"dp_replicate", "dp_shard", "tp"};
}

std::vector<int64_t> ParallelLayout::shape() const {
  if (ep > 1)
    return {dpReplicate, dpShard / ep, ep, tp};
  return {dpReplicate, dpShard, tp};
}

std::pair<int64_t, int64_t> ParallelLayout::batchRows(int64_t rows, int64_t dpRank,
                                                      const std::string &source) const {
  int64_t dp = dataParallelDegree();
  if (rows % dp)
    fail("{}: a global batch of {} rows does not split over the data-parallel degree {} "
         "(data_parallel_replicate_degree {} x data_parallel_shard_degree {})",
         source, rows, dp, dpReplicate, dpShard);
  int64_t count = rows / dp;
  return {dpRank * count, count};
}

} // namespace kiln
