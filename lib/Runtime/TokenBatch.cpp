//===- TokenBatch.cpp - Fixed token batches from JSON ---------------------===//

#include "kiln/Runtime/TokenBatch.h"
#include "kiln/Support/Error.h"
#include "kiln/Support/Json.h"

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

InputsAndLabels splitInputsAndLabels(const Tensor &tokens) {
  if (tokens.rank() != 2 || tokens.dim(1) < 2)
    fail("a token batch must be [batch, seq + 1] with seq >= 1, got {}",
         shapeToString(tokens.shape()));
  int64_t batch = tokens.dim(0), seq = tokens.dim(1) - 1;
  size_t elt = dtypeSize(tokens.dtype());
  Tensor inputs = Tensor::uninitialized(tokens.dtype(), {batch, seq});
  Tensor labels = Tensor::uninitialized(tokens.dtype(), {batch, seq});
  auto *src = static_cast<const char *>(tokens.rawData());
  for (int64_t b = 0; b < batch; ++b) {
    const char *row = src + b * (seq + 1) * elt;
    std::copy_n(row, seq * elt, inputs.mutableData<char>() + b * seq * elt);
    std::copy_n(row + elt, seq * elt, labels.mutableData<char>() + b * seq * elt);
  }
  return {inputs, labels};
}

} // namespace kiln
