//===- PipelineStages.cpp - A decoder's modules split into stages --------===//

#include "kiln/Config/PipelineStages.h"

#include "kiln/Support/Error.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace kiln {

std::vector<int64_t> PipelineStages::stagesOf(int64_t rank) const {
  std::vector<int64_t> stages;
  for (int64_t s = rank; s < numStages(); s += degree)
    stages.push_back(s);
  return stages;
}

int64_t PipelineStages::stageOf(std::string_view fqn) const {
  for (int64_t s = 0; s < numStages(); ++s)
    for (const std::string &module : modules[s])
      if (module == fqn)
        return s;
  return -1;
}

std::string_view topModule(std::string_view fqn) {
  constexpr std::string_view layers = "layers.";
  size_t from = fqn.substr(0, layers.size()) == layers ? layers.size() : 0;
  return fqn.substr(0, fqn.find('.', from));
}

std::vector<std::string> decoderModules(int64_t numLayers) {
  std::vector<std::string> modules{"tok_embeddings"};
  for (int64_t i = 0; i < numLayers; ++i)
    modules.push_back(fmt::format("layers.{}", i));
  modules.push_back("norm");
  modules.push_back("output");
  return modules;
}

namespace {

/// Checks a stage count against the ranks and the schedule; `origin` says
/// where the count came from, for the message.
int64_t checkStageCount(const PipelineStageOptions &o, int64_t numStages,
                        const std::string &origin) {
  if (numStages % o.degree != 0)
    fail("parallelism: {} gives {} stages, which the {} pipeline ranks "
         "(pipeline_parallel_degree) do not divide",
         origin, numStages, o.degree);
  int64_t perRank = numStages / o.degree;
  std::string_view schedule = wordOf(o.schedule);
  if (isSingleStageSchedule(o.schedule) && perRank != 1)
    fail("parallelism.pipeline_parallel_schedule = {} runs one stage per rank, but {} gives {} "
         "stages on {} ranks ({} per rank); use Interleaved1F1B or one stage per rank",
         schedule, origin, numStages, o.degree, perRank);
  if (!isSingleStageSchedule(o.schedule) && perRank < 2)
    fail("parallelism.pipeline_parallel_schedule = {} runs at least 2 stages per rank, but {} "
         "gives {} stages on {} ranks",
         schedule, origin, numStages, o.degree);
  return perRank;
}

/// torchtitan's even split: the embedding counts as `firstStageLessLayers`
/// layers and the norm with the output as `lastStageLessLayers`, and the
/// first `effective % stages` stages take one layer more.
std::vector<std::vector<std::string>> generateStages(const PipelineStageOptions &o,
                                                     int64_t numStages, int64_t numLayers) {
  int64_t first = o.firstStageLessLayers, last = o.lastStageLessLayers;
  int64_t effective = numLayers + first + last;
  int64_t perStage = effective / numStages, extra = effective % numStages;
  if (perStage == 0)
    fail("parallelism: {} pipeline stages cannot split {} layers counted with "
         "pipeline_parallel_first_stage_less_layers = {} and _last_stage_less_layers = {} ({} "
         "in all): a stage would be empty",
         numStages, numLayers, first, last, effective);
  if (first > perStage || last > perStage)
    fail("parallelism.pipeline_parallel_{}_stage_less_layers = {} exceeds the {} layers of "
         "the smallest of {} stages ({} layers, {} counted)",
         first > perStage ? "first" : "last", first > perStage ? first : last, perStage, numStages,
         numLayers, effective);
  std::vector<std::vector<std::string>> stages(numStages);
  int64_t layer = 0;
  for (int64_t s = 0; s < numStages; ++s) {
    int64_t take = perStage + (s < extra ? 1 : 0);
    if (s == 0) {
      stages[s].push_back("tok_embeddings");
      take -= first;
    }
    if (s == numStages - 1)
      take -= last;
    for (; take > 0 && layer < numLayers; --take)
      stages[s].push_back(fmt::format("layers.{}", layer++));
    if (s == numStages - 1) {
      stages[s].push_back("norm");
      stages[s].push_back("output");
    }
    if (stages[s].empty())
      fail("parallelism: pipeline stage {} of {} would hold no module ({} layers, "
           "first_stage_less_layers = {}, last_stage_less_layers = {})",
           s, numStages, numLayers, first, last);
  }
  return stages;
}

/// Listed stages must hold the model's modules once each, in model order.
void checkListedStages(const std::vector<std::vector<std::string>> &parts, int64_t numLayers) {
  std::vector<std::string> expected = decoderModules(numLayers);
  size_t next = 0;
  for (size_t p = 0; p < parts.size(); ++p) {
    if (parts[p].empty())
      fail("parallelism.module_fqns_per_model_part: part {} is empty", p);
    for (const std::string &fqn : parts[p]) {
      if (next >= expected.size() || fqn != expected[next])
        fail("parallelism.module_fqns_per_model_part: part {} lists '{}' where the model's "
             "next module is '{}' (the parts must hold {} once each, in order)",
             p, fqn, next < expected.size() ? expected[next] : std::string("none"),
             fmt::format("tok_embeddings, layers.0 .. layers.{}, norm, output", numLayers - 1));
      ++next;
    }
  }
  if (next != expected.size())
    fail("parallelism.module_fqns_per_model_part: the parts end before '{}'", expected[next]);
}

} // namespace

PipelineStages resolvePipelineStages(const PipelineStageOptions &o, int64_t numLayers) {
  if (o.degree < 1)
    fail("parallelism.pipeline_parallel_degree must be >= 1, got {}", o.degree);
  PipelineStages result;
  result.degree = o.degree;
  if (o.degree == 1 && o.moduleFqnsPerModelPart.empty()) {
    result.modules = {decoderModules(numLayers)};
    return result;
  }
  if (!o.moduleFqnsPerModelPart.empty()) {
    checkListedStages(o.moduleFqnsPerModelPart, numLayers);
    result.stagesPerRank = checkStageCount(o, static_cast<int64_t>(o.moduleFqnsPerModelPart.size()),
                                           "module_fqns_per_model_part");
    result.modules = o.moduleFqnsPerModelPart;
    return result;
  }
  int64_t numStages;
  if (o.layersPerStage > 0) {
    int64_t effective = numLayers + o.firstStageLessLayers + o.lastStageLessLayers;
    numStages = (effective + o.layersPerStage - 1) / o.layersPerStage;
    result.stagesPerRank = checkStageCount(
        o, numStages,
        fmt::format("pipeline_parallel_layers_per_stage = {} over {} layers ({} counted with "
                    "the first and last stages' less layers)",
                    o.layersPerStage, numLayers, effective));
  } else {
    result.stagesPerRank = isSingleStageSchedule(o.schedule) ? 1 : 2;
    numStages = o.degree * result.stagesPerRank;
  }
  result.modules = generateStages(o, numStages, numLayers);
  return result;
}

} // namespace kiln
