//===- NkiBinding.cpp - How an NKI Library kernel takes a Kiln call -------===//

#include "kiln/Dialect/Kiln/IR/NkiBinding.h"

namespace kiln {

std::vector<int64_t> NkiTensorLayout::apply(llvm::ArrayRef<int64_t> shape) const {
  std::vector<int64_t> out(shape.begin(), shape.end());
  if (!permutation.empty()) {
    if (permutation.size() != shape.size())
      return {};
    for (size_t i = 0; i < permutation.size(); ++i)
      out[i] = shape[permutation[i]];
  }
  if (lseTiles) {
    if (out.size() != 3 || out[2] % 128 != 0)
      return {};
    out = {out[0], out[1], 128, out[2] / 128};
  }
  if (foldLeading) {
    if (out.size() < 2)
      return {};
    out[1] *= out[0];
    out.erase(out.begin());
  }
  return out;
}

std::optional<unsigned> NkiBinding::bufferOf(unsigned result) const {
  for (unsigned i = 0; i < arguments.size(); ++i)
    if (arguments[i].source == NkiArgument::Source::OutputBuffer && arguments[i].index == result)
      return i;
  return std::nullopt;
}

std::vector<int64_t> kilnOperandPositions(const NkiBinding &binding, unsigned kilnOperands) {
  std::vector<int64_t> positions(kilnOperands, -1);
  for (unsigned i = 0; i < binding.arguments.size(); ++i) {
    const NkiArgument &a = binding.arguments[i];
    if (a.source == NkiArgument::Source::Operand && a.index < kilnOperands)
      positions[a.index] = i;
  }
  for (int64_t p : positions)
    if (p < 0)
      return {};
  return positions;
}

} // namespace kiln
