//===- NkiBinding.cpp - How an NKI Library kernel takes a Kiln call -------===//

#include "kiln/Dialect/Kiln/IR/NkiBinding.h"

#include <algorithm>

namespace kiln {

std::vector<int64_t> NkiTensorLayout::permuted(llvm::ArrayRef<int64_t> shape) const {
  if (permutation.empty())
    return shape.vec();
  if (permutation.size() != shape.size())
    return {};
  std::vector<int64_t> out(shape.size());
  for (size_t i = 0; i < permutation.size(); ++i) {
    if (permutation[i] < 0 || permutation[i] >= int64_t(shape.size()))
      return {};
    out[i] = shape[size_t(permutation[i])];
  }
  return out;
}

std::vector<int64_t> NkiTensorLayout::tiled(llvm::ArrayRef<int64_t> shape) const {
  std::vector<int64_t> out = permuted(shape);
  if (!lseTiles || out.empty())
    return out;
  if (out.size() != 3 || out[2] % 128 != 0)
    return {};
  return {out[0], out[1], 128, out[2] / 128};
}

std::vector<int64_t> NkiTensorLayout::apply(llvm::ArrayRef<int64_t> shape) const {
  std::vector<int64_t> out = tiled(shape);
  if (!foldLeading || out.empty())
    return out;
  if (out.size() < 2)
    return {};
  out[1] *= out[0];
  out.erase(out.begin());
  return out;
}

std::vector<int64_t> NkiTensorLayout::inversePermutation() const {
  std::vector<int64_t> inverse(permutation.size());
  for (size_t i = 0; i < permutation.size(); ++i)
    inverse[size_t(permutation[i])] = int64_t(i);
  return inverse;
}

int64_t NkiBlockRouting::blockCount(int64_t pairs, int64_t experts, int64_t blockSize) {
  // m nonempty experts fill at most sum ceil(c_e / B) <= (pairs - m) / B + m
  // blocks, most at m = min(experts, pairs): E - 1 + ceil((P - E + 1) / B).
  int64_t rest = std::max<int64_t>(pairs - experts + 1, 1);
  return experts - 1 + (rest + blockSize - 1) / blockSize;
}

std::vector<unsigned> NkiBlockRouting::operands() const {
  std::vector<unsigned> out{tokens, weights, ids, gate, up, down};
  if (cotangent >= 0)
    out.push_back(unsigned(cotangent));
  return out;
}

std::vector<int64_t> kilnOperandPositions(const NkiBinding &binding, unsigned kilnOperands) {
  std::vector<int64_t> positions(kilnOperands, -1);
  if (const std::optional<NkiBlockRouting> &r = binding.routing)
    for (unsigned i : r->operands())
      if (i < kilnOperands)
        positions[i] = -2;
  for (unsigned i = 0; i < binding.arguments.size(); ++i) {
    const NkiArgument &a = binding.arguments[i];
    if (a.source == NkiArgument::Source::Operand && a.index < kilnOperands)
      positions[a.index] = i;
  }
  for (int64_t p : positions)
    if (p == -1)
      return {};
  return positions;
}

} // namespace kiln
