//===- SelectiveAcOption.h - torchtitan's selective_ac_option ----*- C++ -*-===//
//
// The one parser of a selective activation-checkpointing option, shared by
// kiln-activation-checkpoint, the run config and `kiln plan --search-ac`, so
// they accept the same values. Each caller words its own error.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_SELECTIVEACOPTION_H
#define KILN_SELECTIVEACOPTION_H

#include <cstdint>
#include <optional>
#include <string_view>

namespace kiln {

struct SelectiveAcOption {
  /// "op": every layer saves its matmuls' results and recomputes the rest.
  bool opLevel = false;
  /// Otherwise N: layers N-1, 2N-1, ... are recomputed whole (torchtitan
  /// counts blocks from 1 and wraps those with count % N == 0).
  int64_t every = 0;
};

/// `text` as a selective_ac_option: "op", or a positive integer N written in
/// decimal digits alone that fits in int64; nullopt for anything else.
std::optional<SelectiveAcOption> parseSelectiveAcOption(std::string_view text);

} // namespace kiln

#endif // KILN_SELECTIVEACOPTION_H
