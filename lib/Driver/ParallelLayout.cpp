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
                              {"pipeline_parallel_degree", o.pipelineParallelDegree},
                              {"context_parallel_degree", o.contextParallelDegree},
                              {"expert_parallel_degree", o.expertParallelDegree}})
    if (value > kMaxRanks)
      fail("parallelism.{}={} is more than the {} ranks (2^24) Kiln lays out", field, value,
           kMaxRanks);

  ParallelLayout l;
  l.pp = o.pipelineParallelDegree;
  l.dpReplicate = o.dataParallelReplicateDegree;
  l.tp = o.tensorParallelDegree;
  l.cp = o.contextParallelDegree;
  l.cpHeadTail = o.contextParallelLoadBalancer == ContextParallelLoadBalancer::HeadTail;
  l.reshardAfterForward = o.fsdpReshardAfterForward;
  // The pipeline and context-parallel degrees are named only where in use.
  std::string ppName = l.pp > 1 ? "pipeline_parallel_degree x " : "";
  std::string ppValue = l.pp > 1 ? fmt::format("{} x ", l.pp) : "";
  std::string cpName = l.cp > 1 ? "context_parallel_degree x " : "";
  std::string cpValue = l.cp > 1 ? fmt::format("{} x ", l.cp) : "";
  if (o.dataParallelShardDegree == -1) {
    __int128 others = __int128(l.pp) * l.dpReplicate * l.cp * l.tp;
    if (world % others)
      fail("parallelism: {}data_parallel_replicate_degree x {}tensor_parallel_degree = {}{} x "
           "{}{} = {:.0f} does not divide the world of {} ranks, so "
           "data_parallel_shard_degree=-1 has no value",
           ppName, cpName, ppValue, l.dpReplicate, cpValue, l.tp, double(others), world);
    l.dpShard = world / int64_t(others);
  } else {
    l.dpShard = o.dataParallelShardDegree;
  }
  __int128 product = __int128(l.pp) * l.dpReplicate * l.dpShard * l.cp * l.tp;
  if (product != world)
    fail("parallelism: {}data_parallel_replicate_degree x data_parallel_shard_degree x "
         "{}tensor_parallel_degree = {}{} x {} x {}{} = {:.0f}, but the world has {} ranks",
         ppName, cpName, ppValue, l.dpReplicate, l.dpShard, cpValue, l.tp, double(product), world);
  l.stages =
      resolvePipelineStages({l.pp, o.pipelineParallelSchedule, o.pipelineParallelLayersPerStage,
                             o.pipelineParallelFirstStageLessLayers,
                             o.pipelineParallelLastStageLessLayers, o.moduleFqnsPerModelPart},
                            model.numLayers);
  l.schedule = o.pipelineParallelSchedule;
  l.microbatchSize = o.pipelineParallelMicrobatchSize;

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
  if (l.cp > 1) {
    int64_t blocks = l.cpHeadTail ? 2 * l.cp : l.cp;
    if (seqLen % blocks)
      fail("training.seq_len={} must be divisible by {} (parallelism.context_parallel_degree={}{})",
           seqLen, blocks, l.cp,
           l.cpHeadTail ? " x 2 chunks of context_parallel_load_balancer=headtail" : "");
  }
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

std::string ParallelLayout::cpSummary() const {
  return cp > 1 ? fmt::format(" x cp {} ({} sequence)", cp, cpHeadTail ? "head-tail" : "contiguous")
                : "";
}

std::vector<std::string> ParallelLayout::axisNames() const {
  std::vector<std::string> names;
  if (pp > 1)
    names.push_back("pp");
  for (std::string_view name : {"dp_replicate", "dp_shard", "ep", "cp", "tp"})
    if ((ep > 1 || name != "ep") && (cp > 1 || name != "cp"))
      names.push_back(std::string(name));
  return names;
}

std::vector<int64_t> ParallelLayout::shape() const {
  std::vector<int64_t> sizes;
  if (pp > 1)
    sizes.push_back(pp);
  sizes.push_back(dpReplicate);
  if (ep > 1) {
    sizes.push_back(dpShard / ep);
    sizes.push_back(ep);
  } else {
    sizes.push_back(dpShard);
  }
  if (cp > 1)
    sizes.push_back(cp);
  sizes.push_back(tp);
  return sizes;
}

PipelineSchedule ParallelLayout::pipelineSchedule(int64_t localBatchSize) const {
  if (localBatchSize % microbatchSize)
    fail("parallelism.pipeline_parallel_microbatch_size={} must divide "
         "training.local_batch_size={} (a data-parallel rank's rows per step)",
         microbatchSize, localBatchSize);
  return buildPipelineSchedule(schedule, pp, stages.stagesPerRank, localBatchSize / microbatchSize);
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
