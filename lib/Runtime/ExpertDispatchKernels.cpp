//===- ExpertDispatchKernels.cpp - Host kernels of the token dispatcher ---===//
//
// Placement is one sequential pass per chunk (the fill order decides which
// pairs a full block drops); the copies and sums are per token or per row,
// in parallel, each writing its own rows.
//
//===----------------------------------------------------------------------===//

#include "kiln/Runtime/ExpertDispatchKernels.h"
#include "kiln/Runtime/ForwardKernels.h"
#include "kiln/Support/Error.h"

#include <algorithm>
#include <cstring>
#include <vector>

namespace kiln::kernels {

namespace {

/// Tokens, slots per token and tokens per chunk of a [B, ..., k] slots
/// tensor split into `chunks`.
struct TokenChunks {
  int64_t tokens, k, perChunk;
};
TokenChunks tokenChunks(const Tensor &slots, int64_t chunks) {
  int64_t k = slots.shape().back(), tokens = slots.numel() / k;
  if (chunks < 1 || slots.rank() < 2 || slots.shape()[0] % chunks)
    fail("expert dispatch: {} chunks do not split a batch of {}", chunks,
         shapeToString(slots.shape()));
  return {tokens, k, tokens / chunks};
}

/// The buffer row of token t's slot value `slot` (>= 0).
int64_t bufferRow(int64_t slot, int64_t t, const TokenChunks &c, DispatchLayout l) {
  int64_t g = slot / l.capacity, row = slot % l.capacity;
  return g * l.rows() + (t / c.perChunk) * l.capacity + row;
}

/// The layout of a [groups, chunks * capacity, H] buffer.
DispatchLayout layoutOf(const Tensor &rows, int64_t chunks) {
  if (rows.rank() != 3 || rows.dim(1) % chunks)
    fail("expert dispatch: a buffer {} does not hold {} chunks",
         shapeToString(rows.shape()), chunks);
  return {rows.dim(0), chunks, rows.dim(1) / chunks};
}

/// out[t] = sum over t's kept slots (ascending) of buffer[row].
Tensor sumSlots(const Tensor &slots, const Tensor &buffer, DispatchLayout l) {
  TokenChunks c = tokenChunks(slots, l.chunks);
  const int64_t hidden = buffer.dim(2);
  Shape shape = slots.shape();
  shape.back() = hidden;
  Tensor out = Tensor(DType::F32, shape);
  const int64_t *s = slots.data<int64_t>();
  const float *in = buffer.data<float>();
  float *o = out.mutableData<float>();
#pragma omp parallel for schedule(static) if (c.tokens * hidden > (1 << 16))
  for (int64_t t = 0; t < c.tokens; ++t)
    for (int64_t j = 0; j < c.k; ++j)
      if (int64_t slot = s[t * c.k + j]; slot >= 0) {
        const float *r = in + bufferRow(slot, t, c, l) * hidden;
        for (int64_t h = 0; h < hidden; ++h)
          o[t * hidden + h] += r[h];
      }
  return out;
}

} // namespace

DispatchOutputs expertDispatch(const Tensor &x, const Tensor &weights, const Tensor &experts,
                               DispatchLayout l, int64_t numExperts) {
  TokenChunks c = tokenChunks(experts, l.chunks);
  if (l.groups < 1 || numExperts % l.groups || l.capacity < 1)
    fail("expert dispatch: {} groups of capacity {} over {} experts", l.groups, l.capacity,
         numExperts);
  const int64_t hidden = x.shape().back(), perGroup = numExperts / l.groups;
  checkIds(experts, numExperts, "expert id");
  DispatchOutputs out{Tensor(DType::F32, {l.groups, l.rows(), hidden}),
                      Tensor(DType::F32, {l.groups, l.rows(), 1}),
                      Tensor::uninitialized(DType::I64, {l.groups, l.rows(), 1}),
                      Tensor::uninitialized(DType::I64, experts.shape())};
  int64_t *rowExperts = out.rowExperts.mutableData<int64_t>();
  std::fill_n(rowExperts, out.rowExperts.numel(), int64_t(-1));
  int64_t *slots = out.slots.mutableData<int64_t>();
  float *rowWeights = out.rowWeights.mutableData<float>();
  const float *w = weights.data<float>();
  // Slot-major within each chunk (first choices first, as GShard), so a
  // full block drops later choices before earlier ones.
  std::vector<int64_t> filled(l.groups);
  std::vector<int64_t> source(l.groups * l.rows(), -1); // token of each filled row
  for (int64_t s = 0; s < l.chunks; ++s) {
    std::fill(filled.begin(), filled.end(), 0);
    for (int64_t j = 0; j < c.k; ++j)
      for (int64_t t = s * c.perChunk; t < (s + 1) * c.perChunk; ++t) {
        int64_t pair = t * c.k + j, e = idAt(experts, pair), g = e / perGroup;
        if (filled[g] == l.capacity) {
          slots[pair] = -1;
          continue;
        }
        int64_t slot = g * l.capacity + filled[g]++, row = bufferRow(slot, t, c, l);
        slots[pair] = slot;
        rowExperts[row] = e;
        rowWeights[row] = w[pair];
        source[row] = t;
      }
  }
  const float *in = x.data<float>();
  float *rows = out.rows.mutableData<float>();
  const int64_t total = l.groups * l.rows();
#pragma omp parallel for schedule(static) if (total * hidden > (1 << 16))
  for (int64_t r = 0; r < total; ++r)
    if (source[r] >= 0)
      std::memcpy(rows + r * hidden, in + source[r] * hidden, hidden * sizeof(float));
  return out;
}

Tensor expertCombine(const Tensor &slots, const Tensor &rows, int64_t chunks) {
  return sumSlots(slots, rows, layoutOf(rows, chunks));
}

Tensor expertCombineBackward(const Tensor &dout, const Tensor &slots, DispatchLayout l) {
  TokenChunks c = tokenChunks(slots, l.chunks);
  const int64_t hidden = dout.shape().back();
  Tensor grad = Tensor(DType::F32, {l.groups, l.rows(), hidden});
  const int64_t *s = slots.data<int64_t>();
  const float *in = dout.data<float>();
  float *g = grad.mutableData<float>();
  // Every kept slot owns its row: no two pairs write the same one.
#pragma omp parallel for schedule(static) if (c.tokens * hidden > (1 << 16))
  for (int64_t t = 0; t < c.tokens; ++t)
    for (int64_t j = 0; j < c.k; ++j)
      if (int64_t slot = s[t * c.k + j]; slot >= 0)
        std::memcpy(g + bufferRow(slot, t, c, l) * hidden, in + t * hidden,
                    hidden * sizeof(float));
  return grad;
}

std::pair<Tensor, Tensor> expertDispatchBackward(const Tensor &slots, const Tensor &dRows,
                                                 const Tensor &dRowWeights, int64_t chunks) {
  DispatchLayout l = layoutOf(dRows, chunks);
  TokenChunks c = tokenChunks(slots, chunks);
  Tensor dWeights = Tensor::uninitialized(DType::F32, slots.shape());
  const int64_t *s = slots.data<int64_t>();
  const float *drw = dRowWeights.data<float>();
  float *dw = dWeights.mutableData<float>();
  for (int64_t t = 0; t < c.tokens; ++t)
    for (int64_t j = 0; j < c.k; ++j) {
      int64_t slot = s[t * c.k + j];
      dw[t * c.k + j] = slot >= 0 ? drw[bufferRow(slot, t, c, l)] : 0.0f;
    }
  return {sumSlots(slots, dRows, l), dWeights};
}

} // namespace kiln::kernels
