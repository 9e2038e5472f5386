//===- TokenBatch.cpp - Fixed token batches from JSON ---------------------===//

#include "kiln/Runtime/TokenBatch.h"
#include "kiln/Support/Error.h"
#include "kiln/Support/Json.h"

#include <algorithm>

namespace kiln {

Tensor readTokenBatch(const std::string &path) {
  nlohmann::json rows = parseJson(readFile(path), path);
  if (!rows.is_array() || rows.empty())
    fail("{}: expected a non-empty JSON list of token-id lists", path);
  size_t length = 0;
  for (size_t r = 0; r < rows.size(); ++r) {
    if (!rows[r].is_array() || rows[r].empty())
      fail("{}: row {} must be a non-empty list of token ids", path, r);
    if (r == 0)
      length = rows[r].size();
    else if (rows[r].size() != length)
      fail("{}: row {} has {} tokens but row 0 has {}; all rows must have equal length",
           path, r, rows[r].size(), length);
  }
  Tensor tokens(DType::I64, {int64_t(rows.size()), int64_t(length)});
  int64_t *out = tokens.mutableData<int64_t>();
  for (size_t r = 0; r < rows.size(); ++r)
    for (size_t i = 0; i < length; ++i) {
      const nlohmann::json &id = rows[r][i];
      if (!id.is_number_integer() || id.get<int64_t>() < 0)
        fail("{}: row {} position {}: expected a non-negative integer token id, got {}",
             path, r, i, id.dump());
      out[r * length + i] = id.get<int64_t>();
    }
  return tokens;
}

namespace {
/// Inputs and labels of `count` rows of `tokens` from row `first`.
InputsAndLabels splitRows(const Tensor &tokens, int64_t first, int64_t count) {
  int64_t seq = tokens.dim(1) - 1;
  size_t elt = dtypeSize(tokens.dtype());
  Tensor inputs = Tensor::uninitialized(tokens.dtype(), {count, seq});
  Tensor labels = Tensor::uninitialized(tokens.dtype(), {count, seq});
  auto *src = static_cast<const char *>(tokens.rawData());
  for (int64_t b = 0; b < count; ++b) {
    const char *row = src + (first + b) * (seq + 1) * elt;
    std::copy_n(row, seq * elt, inputs.mutableData<char>() + b * seq * elt);
    std::copy_n(row + elt, seq * elt, labels.mutableData<char>() + b * seq * elt);
  }
  return {inputs, labels};
}
} // namespace

InputsAndLabels splitInputsAndLabels(const Tensor &tokens) {
  return splitMicrobatches(tokens, 1).front();
}

std::vector<InputsAndLabels> splitMicrobatches(const Tensor &tokens, int64_t microbatches) {
  if (tokens.rank() != 2 || tokens.dim(1) < 2)
    fail("a token batch must be [batch, seq + 1] with seq >= 1, got {}",
         shapeToString(tokens.shape()));
  if (microbatches < 1 || tokens.dim(0) % microbatches)
    fail("a token batch of {} rows does not split into {} microbatches", tokens.dim(0),
         microbatches);
  std::vector<InputsAndLabels> split;
  for (int64_t m = 0; m < microbatches; ++m)
    split.push_back(splitRows(tokens, m * (tokens.dim(0) / microbatches),
                              tokens.dim(0) / microbatches));
  return split;
}

const InputsAndLabels &microbatchPiece(const std::vector<InputsAndLabels> &pieces, int64_t run,
                                       int64_t group, int64_t j, int64_t groups,
                                       int64_t microbatches) {
  return pieces.at(size_t((run * groups + group) * microbatches + j));
}

InputsAndLabels stackedMicrobatch(const std::vector<InputsAndLabels> &pieces, int64_t run,
                                  int64_t j, int64_t groups, int64_t microbatches) {
  InputsAndLabels stacked;
  for (Tensor InputsAndLabels::*part : {&InputsAndLabels::inputIds, &InputsAndLabels::labels}) {
    const Tensor &first = microbatchPiece(pieces, run, 0, j, groups, microbatches).*part;
    Shape shape = first.shape();
    shape[0] *= groups;
    Tensor out(DType::I64, shape);
    int64_t *to = out.mutableData<int64_t>();
    for (int64_t g = 0; g < groups; ++g) {
      const Tensor &rows = microbatchPiece(pieces, run, g, j, groups, microbatches).*part;
      to = std::copy(rows.data<int64_t>(), rows.data<int64_t>() + rows.numel(), to);
    }
    stacked.*part = std::move(out);
  }
  return stacked;
}

} // namespace kiln
