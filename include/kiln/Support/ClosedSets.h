//===- ClosedSets.h - Options that take one of a few words -------*- C++ -*-===//
//
// Every training option whose value is one of a few words is a C++ enum,
// declared here once with its words (torchtitan's spelling), as CIRCT's
// SeqEnums.h serves its passes. The passes' options (Passes.td, through
// the llvm::cl parsers of ClosedSetOption.h), the pipeline options, the run
// config's checks, the kiln dialect's attributes and the runtime all read
// these; none of them compares the words. Free of MLIR and LLVM: the
// runtime uses it.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_SUPPORT_CLOSEDSETS_H
#define KILN_SUPPORT_CLOSEDSETS_H

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kiln {

/// lr_scheduler.decay_type: the shape of the learning rate's decay.
enum class DecayType { Linear, Sqrt, Cosine };
/// activation_checkpoint.mode: what the backward recomputes.
enum class CheckpointMode { None, Selective, Full };
/// parallelism.fsdp_reshard_after_forward: whether parameters are gathered at
/// each use (Default, Always) or once for all uses (Never).
enum class ReshardAfterForward { Default, Always, Never };
/// training.mixed_precision_param and _reduce: a precision.
enum class PrecisionDtype { Float32, BFloat16 };
/// parallelism.expert_dispatch: how routed tokens reach their experts.
enum class ExpertDispatcher { AllGather, AllToAll };
/// parallelism.context_parallel_load_balancer: how the sequence is laid out
/// over the cp ranks (torchtitan's "headtail", or None: natural order).
enum class ContextParallelLoadBalancer { HeadTail, None };
/// target.name: the machine kernels are checked against and plans are for.
enum class TargetName { Trn2, Trn1, Cpu };
/// parallelism.pipeline_parallel_schedule: the order of a pipeline's
/// microbatches (torch.distributed.pipelining's schedule names). GPipe and
/// 1F1B run one stage per rank, Interleaved1F1B several (looped).
enum class PipelineScheduleKind { GPipe, OneFOneB, Interleaved1F1B };
/// model.converters: torchtitan's model converters (Float8 linears).
enum class ModelConverter { Float8 };
/// float8.recipe_name: torchao's Float8 scaling recipe. Tensorwise and rowwise
/// run all three GEMMs of a linear in float8; rowwise_with_gw_hp keeps the
/// weight gradient's GEMM in high precision.
enum class Float8Recipe { Tensorwise, Rowwise, RowwiseWithGwHp };

/// The words of a closed set, in the enum's order (value i is words[i]).
template <typename E> struct ClosedSet;
template <> struct ClosedSet<DecayType> {
  static constexpr std::array<std::string_view, 3> words{"linear", "sqrt", "cosine"};
};
template <> struct ClosedSet<CheckpointMode> {
  static constexpr std::array<std::string_view, 3> words{"none", "selective", "full"};
};
template <> struct ClosedSet<ReshardAfterForward> {
  static constexpr std::array<std::string_view, 3> words{"default", "always", "never"};
};
template <> struct ClosedSet<PrecisionDtype> {
  static constexpr std::array<std::string_view, 2> words{"float32", "bfloat16"};
};
template <> struct ClosedSet<ExpertDispatcher> {
  static constexpr std::array<std::string_view, 2> words{"all_gather", "all_to_all"};
};
template <> struct ClosedSet<ContextParallelLoadBalancer> {
  static constexpr std::array<std::string_view, 2> words{"headtail", "none"};
};
template <> struct ClosedSet<TargetName> {
  static constexpr std::array<std::string_view, 3> words{"trn2", "trn1", "cpu"};
};
template <> struct ClosedSet<PipelineScheduleKind> {
  static constexpr std::array<std::string_view, 3> words{"GPipe", "1F1B", "Interleaved1F1B"};
};
template <> struct ClosedSet<ModelConverter> {
  static constexpr std::array<std::string_view, 1> words{"float8"};
};
template <> struct ClosedSet<Float8Recipe> {
  static constexpr std::array<std::string_view, 3> words{"tensorwise", "rowwise",
                                                         "rowwise_with_gw_hp"};
};

/// The word of `value`.
template <typename E> constexpr std::string_view wordOf(E value) {
  return ClosedSet<E>::words[static_cast<size_t>(value)];
}

/// The value whose word is `word` (exact letter case); none for any other.
template <typename E> constexpr std::optional<E> parseWord(std::string_view word) {
  const auto &words = ClosedSet<E>::words;
  for (size_t i = 0; i < words.size(); ++i)
    if (words[i] == word)
      return static_cast<E>(i);
  return std::nullopt;
}

/// Every word of E, in order.
template <typename E> std::vector<std::string> wordsOf() {
  const auto &words = ClosedSet<E>::words;
  return {words.begin(), words.end()};
}

/// The words of E for a message: "linear, sqrt, cosine" (or joined by
/// another `separator`).
template <typename E> std::string listWords(std::string_view separator = ", ") {
  std::string list;
  for (std::string_view word : ClosedSet<E>::words) {
    if (!list.empty())
      list += separator;
    list += word;
  }
  return list;
}

} // namespace kiln

#endif // KILN_SUPPORT_CLOSEDSETS_H
