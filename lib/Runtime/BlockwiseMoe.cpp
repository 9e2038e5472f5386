//===- BlockwiseMoe.cpp - nkilib's blockwise MoE, as the NKI Library defines it ===//

#include "kiln/Runtime/BlockwiseMoe.h"
#include "kiln/Support/Error.h"

#include <cmath>
#include <vector>

namespace kiln::kernels {
namespace {

/// The blockwise form's shapes, checked once for both directions.
struct Form {
  int64_t rows, h, e, inter, blocks, blockSize;
  const float *x, *aff, *w, *wd;
  const int32_t *pos, *be;
  Tensor xf, af, wf, wdf; // float32 copies the pointers read
  std::string where;

  Form(const Tensor &hidden, const Tensor &affinities, const Tensor &gateUp, const Tensor &down,
       const Tensor &tokenPositions, const Tensor &blockExperts, int64_t block,
       const std::string &at)
      : blockSize(block), where(at) {
    const Shape &hs = hidden.shape(), &gs = gateUp.shape(), &ds = down.shape();
    if (hs.size() != 2 || gs.size() != 4 || ds.size() != 3 || gs[1] != hs[1] || gs[2] != 2 ||
        ds[0] != gs[0] || ds[1] != gs[3] || ds[2] != hs[1])
      fail("{}: hidden {}, gate_up {}, down {} are not [T+1, H], [E, H, 2, I], [E, I, H]", where,
           shapeToString(hs), shapeToString(gs), shapeToString(ds));
    rows = hs[0], h = hs[1], e = gs[0], inter = gs[3], blocks = blockExperts.numel();
    if (affinities.numel() != rows * e || blockSize <= 0 ||
        tokenPositions.numel() != blocks * blockSize || tokenPositions.dtype() != DType::I32 ||
        blockExperts.dtype() != DType::I32)
      fail("{}: affinities {} (want {} elements), token positions {} and block experts {} (I32, "
           "{} rows of {} blocks) do not agree",
           where, shapeToString(affinities.shape()), rows * e,
           shapeToString(tokenPositions.shape()), shapeToString(blockExperts.shape()),
           blocks * blockSize, blocks);
    xf = hidden.to(DType::F32), af = affinities.to(DType::F32), wf = gateUp.to(DType::F32),
    wdf = down.to(DType::F32);
    x = xf.data<float>(), aff = af.data<float>(), w = wf.data<float>(), wd = wdf.data<float>();
    pos = tokenPositions.data<int32_t>(), be = blockExperts.data<int32_t>();
  }

  int64_t expertOf(int64_t n) const {
    int64_t expert = be[n];
    if (expert < 0 || expert >= e)
      fail("{}: block {} is expert {}, not one of {}", where, n, expert, e);
    return expert;
  }
  int64_t tokenOf(int64_t n, int64_t r) const {
    int64_t t = pos[n * blockSize + r];
    if (t < 0 || t >= rows)
      fail("{}: row {} of block {} reads token {}, not one of {}", where, r, n, t, rows);
    return t;
  }
  /// gate and up of token t under expert `expert`: h_t . W[e, :, j, :].
  void project(int64_t expert, int64_t t, std::vector<double> &g, std::vector<double> &u) const {
    std::fill(g.begin(), g.end(), 0.0);
    std::fill(u.begin(), u.end(), 0.0);
    const float *xt = x + t * h, *wg = w + expert * h * 2 * inter;
    for (int64_t c = 0; c < h; ++c) {
      double v = xt[c];
      const float *row = wg + c * 2 * inter;
      for (int64_t i = 0; i < inter; ++i) {
        g[size_t(i)] += v * row[i];
        u[size_t(i)] += v * row[inter + i];
      }
    }
  }
};

double sigmoid(double v) { return 1.0 / (1.0 + std::exp(-v)); }

Tensor fromFloats(const std::vector<float> &values, Shape shape, DType dtype) {
  Tensor t = Tensor::uninitialized(DType::F32, std::move(shape));
  std::copy(values.begin(), values.end(), t.mutableData<float>());
  return dtype == DType::F32 ? t : t.to(dtype);
}

} // namespace

BlockwiseMoeOutputs blockwiseMoe(const Tensor &hidden, const Tensor &affinities,
                                 const Tensor &gateUp, const Tensor &down,
                                 const Tensor &tokenPositions, const Tensor &blockExperts,
                                 int64_t blockSize, bool checkpoint, const std::string &where) {
  Form f(hidden, affinities, gateUp, down, tokenPositions, blockExperts, blockSize, where);
  int64_t n = f.blocks, b = blockSize, inter = f.inter, h = f.h;
  std::vector<float> out(size_t(f.rows * h), 0.0f), act(static_cast<size_t>(inter));
  std::vector<float> gu, dn;
  if (checkpoint)
    gu.assign(size_t(n * 2 * inter * b), 0.0f), dn.assign(size_t(n * b * h), 0.0f);
  std::vector<double> g(static_cast<size_t>(inter)), u(static_cast<size_t>(inter)),
      row(static_cast<size_t>(h));
  for (int64_t blk = 0; blk < n; ++blk) {
    int64_t expert = f.expertOf(blk);
    const float *wdown = f.wd + expert * inter * h;
    for (int64_t r = 0; r < b; ++r) {
      int64_t t = f.tokenOf(blk, r);
      f.project(expert, t, g, u);
      for (int64_t i = 0; i < inter; ++i) {
        act[size_t(i)] = float(g[size_t(i)] * sigmoid(g[size_t(i)]) * u[size_t(i)]);
        if (checkpoint) {
          gu[size_t(((blk * 2 + 0) * inter + i) * b + r)] = float(g[size_t(i)]);
          gu[size_t(((blk * 2 + 1) * inter + i) * b + r)] = float(u[size_t(i)]);
        }
      }
      // The down projection row by row of down [I, H]: contiguous reads.
      std::fill(row.begin(), row.end(), 0.0);
      for (int64_t i = 0; i < inter; ++i) {
        double a = act[size_t(i)];
        const float *wi = wdown + i * h;
        for (int64_t c = 0; c < h; ++c)
          row[size_t(c)] += a * wi[c];
      }
      double scale = f.aff[t * f.e + expert];
      float *ot = out.data() + t * h;
      for (int64_t c = 0; c < h; ++c) {
        if (checkpoint)
          dn[size_t((blk * b + r) * h + c)] = float(row[size_t(c)]);
        ot[c] += float(scale * row[size_t(c)]);
      }
    }
  }
  BlockwiseMoeOutputs result{fromFloats(out, {f.rows, h}, hidden.dtype()), Tensor(), Tensor()};
  if (checkpoint) {
    result.gateUpActivations = fromFloats(gu, {n, 2, inter, b}, gateUp.dtype());
    result.downActivations = fromFloats(dn, {n, b, h}, down.dtype());
  }
  return result;
}

BlockwiseMoeGrads blockwiseMoeBackward(const Tensor &hidden, const Tensor &affinities,
                                       const Tensor &gateUp, const Tensor &down,
                                       const Tensor &gateUpActivations,
                                       const Tensor &downActivations, const Tensor &tokenPositions,
                                       const Tensor &blockExperts, const Tensor &outputGrad,
                                       int64_t blockSize, const std::string &where) {
  Form f(hidden, affinities, gateUp, down, tokenPositions, blockExperts, blockSize, where);
  int64_t n = f.blocks, b = blockSize, inter = f.inter, h = f.h, e = f.e;
  if (gateUpActivations.shape() != Shape{n, 2, inter, b} ||
      downActivations.shape() != Shape{n, b, h} || outputGrad.shape() != hidden.shape())
    fail("{}: checkpoints {} and {} and output gradient {} are not [N, 2, I, B], [N, B, H] and "
         "hidden's {}",
         where, shapeToString(gateUpActivations.shape()), shapeToString(downActivations.shape()),
         shapeToString(outputGrad.shape()), shapeToString(hidden.shape()));
  Tensor guF = gateUpActivations.to(DType::F32), dnF = downActivations.to(DType::F32),
         dyF = outputGrad.to(DType::F32);
  const float *gu = guF.data<float>(), *dn = dnF.data<float>(), *dy = dyF.data<float>();
  std::vector<float> dx(size_t(f.rows * h), 0.0f), daff(size_t(f.rows * e), 0.0f),
      dgu(size_t(e * h * 2 * inter), 0.0f), ddown(size_t(e * inter * h), 0.0f);
  std::vector<double> dout(static_cast<size_t>(h)), gGrad(static_cast<size_t>(inter)),
      uGrad(static_cast<size_t>(inter));
  for (int64_t blk = 0; blk < n; ++blk) {
    int64_t expert = f.expertOf(blk);
    const float *wdown = f.wd + expert * inter * h, *wg = f.w + expert * h * 2 * inter;
    for (int64_t r = 0; r < b; ++r) {
      int64_t t = f.tokenOf(blk, r);
      const float *dyt = dy + t * h, *dnr = dn + (blk * b + r) * h;
      double a = f.aff[t * e + expert], dot = 0;
      for (int64_t c = 0; c < h; ++c) {
        dot += double(dyt[c]) * dnr[c];
        dout[size_t(c)] = double(dyt[c]) * a;
      }
      daff[size_t(t * e + expert)] = float(dot); // assigned: each (t, e) is one row
      float *dd = ddown.data() + expert * inter * h;
      for (int64_t i = 0; i < inter; ++i) {
        double g = gu[((blk * 2 + 0) * inter + i) * b + r],
               u = gu[((blk * 2 + 1) * inter + i) * b + r];
        double s = sigmoid(g), silu = g * s, first = silu * u;
        double firstGrad = 0;
        for (int64_t c = 0; c < h; ++c) {
          dd[i * h + c] += float(first * dout[size_t(c)]);
          firstGrad += dout[size_t(c)] * wdown[i * h + c];
        }
        gGrad[size_t(i)] = firstGrad * u * s * (1 + g * (1 - s));
        uGrad[size_t(i)] = firstGrad * silu;
      }
      const float *xt = f.x + t * h;
      float *dxt = dx.data() + t * h, *dg = dgu.data() + expert * h * 2 * inter;
      for (int64_t c = 0; c < h; ++c) {
        double acc = 0;
        for (int64_t i = 0; i < inter; ++i) {
          dg[(c * 2 + 0) * inter + i] += float(xt[c] * gGrad[size_t(i)]);
          dg[(c * 2 + 1) * inter + i] += float(xt[c] * uGrad[size_t(i)]);
          acc += gGrad[size_t(i)] * wg[(c * 2 + 0) * inter + i] +
                 uGrad[size_t(i)] * wg[(c * 2 + 1) * inter + i];
        }
        dxt[c] += float(acc);
      }
    }
  }
  return {fromFloats(dx, hidden.shape(), hidden.dtype()),
          fromFloats(daff, affinities.shape(), affinities.dtype()),
          fromFloats(dgu, gateUp.shape(), gateUp.dtype()),
          fromFloats(ddown, down.shape(), down.dtype())};
}

} // namespace kiln::kernels
