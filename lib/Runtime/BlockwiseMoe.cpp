//===- BlockwiseMoe.cpp - nkilib's blockwise MoE, as the NKI Library defines it ===//

#include "kiln/Runtime/BlockwiseMoe.h"
#include "kiln/Support/Error.h"

#include <cmath>
#include <vector>

namespace kiln::kernels {

Tensor blockwiseMoe(const Tensor &hidden, const Tensor &affinities, const Tensor &gateUp,
                    const Tensor &down, const Tensor &tokenPositions, const Tensor &blockExperts,
                    int64_t blockSize, const std::string &where) {
  const Shape &hs = hidden.shape(), &gs = gateUp.shape(), &ds = down.shape();
  if (hs.size() != 2 || gs.size() != 4 || ds.size() != 3 || gs[1] != hs[1] || gs[2] != 2 ||
      ds[0] != gs[0] || ds[1] != gs[3] || ds[2] != hs[1])
    fail("{}: hidden {}, gate_up {}, down {} are not [T+1, H], [E, H, 2, I], [E, I, H]", where,
         shapeToString(hs), shapeToString(gs), shapeToString(ds));
  int64_t rows = hs[0], h = hs[1], e = gs[0], inter = gs[3];
  int64_t blocks = blockExperts.numel();
  if (affinities.numel() != rows * e || blockSize <= 0 ||
      tokenPositions.numel() != blocks * blockSize || tokenPositions.dtype() != DType::I32 ||
      blockExperts.dtype() != DType::I32)
    fail("{}: affinities {} (want {} elements), token positions {} and block experts {} (I32, "
         "{} rows of {} blocks) do not agree",
         where, shapeToString(affinities.shape()), rows * e, shapeToString(tokenPositions.shape()),
         shapeToString(blockExperts.shape()), blocks * blockSize, blocks);
  Tensor x = hidden.to(DType::F32), a = affinities.to(DType::F32), w = gateUp.to(DType::F32),
         wd = down.to(DType::F32);
  const float *xp = x.data<float>(), *ap = a.data<float>(), *wp = w.data<float>(),
              *dp = wd.data<float>();
  const int32_t *pos = tokenPositions.data<int32_t>(), *be = blockExperts.data<int32_t>();
  std::vector<float> out(size_t(rows * h), 0.0f);
  std::vector<float> act(static_cast<size_t>(inter));
  for (int64_t n = 0; n < blocks; ++n) {
    int64_t expert = be[n];
    if (expert < 0 || expert >= e)
      fail("{}: block {} is expert {}, not one of {}", where, n, expert, e);
    const float *wg = wp + expert * h * 2 * inter, *wdown = dp + expert * inter * h;
    for (int64_t r = 0; r < blockSize; ++r) {
      int64_t t = pos[n * blockSize + r];
      if (t < 0 || t >= rows)
        fail("{}: row {} of block {} reads token {}, not one of {}", where, r, n, t, rows);
      const float *xt = xp + t * h;
      // gate_up[e, :, 0, :] and [e, :, 1, :]: h_t . W[:, j, :].
      std::vector<double> g(size_t(inter), 0.0), u(size_t(inter), 0.0);
      for (int64_t c = 0; c < h; ++c) {
        double v = xt[c];
        const float *row = wg + c * 2 * inter;
        for (int64_t i = 0; i < inter; ++i) {
          g[size_t(i)] += v * row[i];
          u[size_t(i)] += v * row[inter + i];
        }
      }
      for (int64_t i = 0; i < inter; ++i) {
        double s = g[size_t(i)] / (1.0 + std::exp(-g[size_t(i)]));
        act[size_t(i)] = float(s * u[size_t(i)]);
      }
      double scale = ap[t * e + expert];
      float *ot = out.data() + t * h;
      for (int64_t c = 0; c < h; ++c) {
        double acc = 0;
        for (int64_t i = 0; i < inter; ++i)
          acc += double(act[size_t(i)]) * wdown[i * h + c];
        ot[c] += float(scale * acc);
      }
    }
  }
  Tensor result = Tensor::uninitialized(DType::F32, {rows, h});
  std::copy(out.begin(), out.end(), result.mutableData<float>());
  return hidden.dtype() == DType::F32 ? result : result.to(hidden.dtype());
}

} // namespace kiln::kernels
