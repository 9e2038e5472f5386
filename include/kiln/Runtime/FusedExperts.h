//===- FusedExperts.h - Transformers v5's fused expert tensors --*- C++ -*-===//
//
// Transformers v5 holds a Qwen3-MoE layer's experts fused: per layer
// `<prefix>.mlp.experts.gate_up_proj` [E, 2I, H] (expert e's gate_proj rows,
// then its up_proj rows) and `<prefix>.mlp.experts.down_proj` [E, H, I], and
// writes them so with save_pretrained(save_original_format=False). v4, and
// v5 by default, store one key per expert and projection
// (`<prefix>.mlp.experts.<e>.gate_proj.weight` [I, H], ...). Checkpoint reads
// the fused tensors as the per-expert keys they hold: each is a contiguous
// block of its fused tensor, so the members are views, not copies.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_RUNTIME_FUSEDEXPERTS_H
#define KILN_RUNTIME_FUSEDEXPERTS_H

#include "kiln/Runtime/Tensor.h"

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace kiln {

/// One per-expert tensor inside a fused one.
struct FusedExpertMember {
  std::string fusedName; ///< the stored tensor holding it
  Shape shape;
  size_t byteOffset = 0; ///< where it starts in the fused tensor's bytes
};

/// The per-expert tensors held by the fused expert tensors among `names`
/// (a checkpoint's stored keys; `get` gives any one as a view), by their
/// per-expert keys; empty when there are none. Throws kiln::Error naming
/// `path` and the keys when a fused pair is incomplete or its shapes do not
/// fit [E, 2I, H] and [E, H, I], or when the checkpoint also stores
/// per-expert keys (one checkpoint, one layout).
std::map<std::string, FusedExpertMember>
fusedExpertMembers(const std::vector<std::string> &names,
                   const std::function<Tensor(const std::string &)> &get,
                   const std::string &path);

/// Member `member` of the fused tensor `fused`: a view sharing its storage.
Tensor fusedExpertView(const Tensor &fused, const FusedExpertMember &member);

} // namespace kiln

#endif // KILN_RUNTIME_FUSEDEXPERTS_H
