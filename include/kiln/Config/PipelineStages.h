//===- PipelineStages.h - A decoder's modules split into stages --*- C++ -*-===//
//
// Pipeline parallelism's first decision: which of the model's modules each
// pipeline stage holds, and which rank runs each stage. torchtitan's rules:
// the stages are either listed (module_fqns_per_model_part) or generated
// from the layer count, the embedding and the output counted as
// `*_stage_less_layers` layers; single-stage schedules (GPipe, 1F1B) run one
// stage per rank, looped ones (Interleaved1F1B) several, stage s on rank
// s % degree. The one resolver of these options, shared by the run config,
// the passes that split the step and the planner; no MLIR.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_CONFIG_PIPELINESTAGES_H
#define KILN_CONFIG_PIPELINESTAGES_H

#include "kiln/Config/PipelineSchedule.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kiln {

/// The `parallelism.pipeline_parallel_*` options that decide the stages.
struct PipelineStageOptions {
  int64_t degree = 1;
  PipelineScheduleKind schedule = PipelineScheduleKind::OneFOneB;
  /// 0: one stage per rank (GPipe, 1F1B) or two (Interleaved1F1B).
  int64_t layersPerStage = 0;
  int64_t firstStageLessLayers = 1, lastStageLessLayers = 1;
  /// Explicit stages; empty: generated.
  std::vector<std::vector<std::string>> moduleFqnsPerModelPart;
};

struct PipelineStages {
  int64_t degree = 1, stagesPerRank = 1;
  /// Each stage's modules, in model order.
  std::vector<std::vector<std::string>> modules;

  int64_t numStages() const { return static_cast<int64_t>(modules.size()); }
  /// The pipeline rank that runs `stage` (looped placement).
  int64_t rankOf(int64_t stage) const { return pipelineRankOf(stage, degree); }
  /// The stages `rank` runs, in model order.
  std::vector<int64_t> stagesOf(int64_t rank) const;
  /// The stage holding module `fqn` ("layers.3"), or -1.
  int64_t stageOf(std::string_view fqn) const;
};

/// The top-level module of an fqn, the unit stages are made of: "layers.N"
/// for anything under a transformer block, else the first component
/// ("tok_embeddings", "norm", "output", "loss"); "" for an empty fqn.
std::string_view topModule(std::string_view fqn);

/// A decoder's top-level modules in order, torchtitan's names:
/// tok_embeddings, layers.0 .. layers.<numLayers-1>, norm, output.
std::vector<std::string> decoderModules(int64_t numLayers);

/// The stages of a decoder of `numLayers` layers under `options`. Throws
/// kiln::Error naming the options and the numbers for a split that cannot be
/// made: stages that do not divide over the ranks, a stage count the
/// schedule cannot run, an empty stage, listed modules that are not the
/// model's modules once each in order.
PipelineStages resolvePipelineStages(const PipelineStageOptions &options, int64_t numLayers);

} // namespace kiln

#endif // KILN_CONFIG_PIPELINESTAGES_H
