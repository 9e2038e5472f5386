//===- MoeKernels.cpp - Host kernels for the mixture-of-experts layer -----===//
//
// The experts run on the grouped layout: the (token, slot) pairs are sorted
// by expert (counting sort, in HF's order), each pair's input row is
// copied there, and every expert then is a few GEMMs over its contiguous
// block of rows instead of one matrix-vector product per pair.
//
//===----------------------------------------------------------------------===//

#include "kiln/Runtime/MoeKernels.h"
#include "kiln/Runtime/BackwardKernels.h"
#include "kiln/Runtime/ForwardKernels.h"
#include "kiln/Support/Error.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <numeric>

namespace kiln::kernels {

namespace {

/// torch.topk's order: NaN above every number, then larger first. Callers
/// scan ascending ids and replace only on "strictly above", so ties keep the
/// lower id.
bool ranksAbove(float a, float b) { return std::isnan(a) ? !std::isnan(b) : a > b; }

/// Row-major c[m, n] = op(a)[m, k] op(b)[k, n] + beta c.
void gemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k, const float *a,
          const float *b, float beta, float *c) {
  cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans,
              transB ? CblasTrans : CblasNoTrans, m, n, k, 1.0f, a, transA ? m : k, b,
              transB ? k : n, beta, c, n);
}

/// The (token, slot) pairs grouped by expert. Pair i = t * k + j; the pairs
/// of expert e sit at [start[e], start[e + 1]) by slot, then token; pair[p]
/// is the pair at grouped position p and at[i] the grouped position of
/// pair i, -1 for a pair routed to an expert of another rank's shard.
struct Grouping {
  std::vector<int64_t> start, pair, at;

  int64_t size(int64_t e) const { return start[e + 1] - start[e]; }
  /// fn(e, first grouped position, rows) for every expert that has pairs.
  template <typename Fn> void forEachExpert(Fn fn) const {
    for (size_t e = 0; e + 1 < start.size(); ++e)
      if (size(e) > 0)
        fn(int64_t(e), start[e], size(e));
  }
};

/// The grouping over the `numExperts` experts of `shard`.
Grouping groupByExpert(const Tensor &experts, int64_t numExperts, ExpertShard shard) {
  const int64_t total = shard.total ? shard.total : numExperts;
  if (shard.offset < 0 || shard.offset + numExperts > total)
    fail("grouped experts: a shard of {} experts at {} does not fit in {}", numExperts,
         shard.offset, total);
  // -1 marks an unfilled row of a dispatch buffer: no expert.
  for (int64_t i = 0, n = experts.numel(); i < n; ++i)
    if (int64_t id = idAt(experts, i); id < -1 || id >= total)
      fail("expert id {} at position {} is outside [0, {}) (or -1, an unfilled row)", id, i,
           total);
  const int64_t pairs = experts.numel();
  // The local expert of pair i, or -1.
  auto local = [&](int64_t i) {
    int64_t e = idAt(experts, i) - shard.offset;
    return e >= 0 && e < numExperts ? e : -1;
  };
  Grouping g;
  g.start.assign(numExperts + 1, 0);
  g.at.assign(pairs, -1);
  for (int64_t i = 0; i < pairs; ++i)
    if (int64_t e = local(i); e >= 0)
      ++g.start[e + 1];
  std::partial_sum(g.start.begin(), g.start.end(), g.start.begin());
  g.pair.resize(g.start.back());
  std::vector<int64_t> next(g.start.begin(), g.start.end() - 1);
  // Slot-major, as HF's torch.where over the [k, tokens] expert mask lists
  // an expert's tokens: its first-choice tokens, then its second-choice ones.
  // GEMMs summing over an expert's tokens then add them in HF's order.
  const int64_t k = experts.rank() == 0 ? 1 : experts.shape().back(), tokens = pairs / k;
  for (int64_t j = 0; j < k; ++j)
    for (int64_t t = 0; t < tokens; ++t) {
      int64_t i = t * k + j, e = local(i);
      if (e < 0)
        continue;
      int64_t p = next[e]++;
      g.pair[p] = i;
      g.at[i] = p;
    }
  return g;
}

/// [pairs, dim]: row p = scale(pair p) * src row of pair p's token.
template <typename Scale>
Tensor gatherRows(const Tensor &src, const Grouping &g, int64_t k, Scale scale) {
  const int64_t dim = src.shape().back(), pairs = int64_t(g.pair.size());
  Tensor out = Tensor::uninitialized(DType::F32, {pairs, dim});
  const float *s = src.data<float>();
  float *o = out.mutableData<float>();
#pragma omp parallel for schedule(static) if (pairs * dim > (1 << 16))
  for (int64_t p = 0; p < pairs; ++p) {
    const float *row = s + g.pair[p] / k * dim;
    float c = scale(g.pair[p]);
    for (int64_t h = 0; h < dim; ++h)
      o[p * dim + h] = c * row[h];
  }
  return out;
}

/// Per-expert gate and up projections of the grouped rows xs [pairs, H]:
/// (G, U) [pairs, I] with G = xs w1_e^T, U = xs w3_e^T.
std::pair<Tensor, Tensor> gateAndUp(const Tensor &xs, const Grouping &g, const Tensor &w1,
                                    const Tensor &w3) {
  const int64_t inter = w1.dim(1), hidden = w1.dim(2), pairs = xs.dim(0);
  Tensor gate = Tensor::uninitialized(DType::F32, {pairs, inter});
  Tensor up = Tensor::uninitialized(DType::F32, {pairs, inter});
  g.forEachExpert([&](int64_t e, int64_t s, int64_t n) {
    const float *x = xs.data<float>() + s * hidden;
    gemm(false, true, n, inter, hidden, x, w1.data<float>() + e * inter * hidden, 0.0f,
         gate.mutableData<float>() + s * inter);
    gemm(false, true, n, inter, hidden, x, w3.data<float>() + e * inter * hidden, 0.0f,
         up.mutableData<float>() + s * inter);
  });
  return {gate, up};
}

/// Per-expert down projection of act [pairs, I]: [pairs, H] = act w2_e^T.
Tensor downProjection(const Tensor &act, const Grouping &g, const Tensor &w2) {
  const int64_t hidden = w2.dim(1), inter = w2.dim(2), pairs = act.dim(0);
  Tensor y = Tensor::uninitialized(DType::F32, {pairs, hidden});
  g.forEachExpert([&](int64_t e, int64_t s, int64_t n) {
    gemm(false, true, n, hidden, inter, act.data<float>() + s * inter,
         w2.data<float>() + e * hidden * inter, 0.0f, y.mutableData<float>() + s * hidden);
  });
  return y;
}

/// t rounded to `round` (mixed precision); F32 leaves it as it is.
Tensor rounded(Tensor t, DType round) {
  return round == DType::F32 ? t : roundTo(std::move(t), round);
}

/// Recomputed output rows of the grouped pairs: (G, U, silu(G) * U, Y).
struct ExpertActivations {
  Tensor gate, up, act, y;
};

/// Rounds where a dense MLP's linears round under mixed precision: their
/// outputs G, U and Y, and the down projection's input.
ExpertActivations runExperts(const Tensor &xs, const Grouping &g, const Tensor &w1,
                             const Tensor &w3, const Tensor &w2, DType round) {
  auto [gate, up] = gateAndUp(xs, g, w1, w3);
  gate = rounded(std::move(gate), round);
  up = rounded(std::move(up), round);
  Tensor act = rounded(swiglu(gate, up), round);
  Tensor y = rounded(downProjection(act, g, w2), round);
  return {gate, up, act, y};
}

/// The grouped positions of token t's local pairs, ascending (the grouping
/// puts experts in ascending id order and, within one expert, slots in
/// ascending order, which is the order HF's index_add_ adds them in); returns
/// how many.
int64_t positionsOfToken(const Grouping &g, int64_t t, int64_t k, int64_t *pos) {
  int64_t *end = std::copy_if(g.at.data() + t * k, g.at.data() + (t + 1) * k, pos,
                              [](int64_t p) { return p >= 0; });
  std::sort(pos, end);
  return end - pos;
}

/// out [shape] with out[t] = sum over token t's pairs p, in ascending expert
/// order, of scale(pair) * rows[p] (rows grouped [pairs, H]): from 0, in
/// float, as HF's index_add_ adds. A gather per token, so no write races.
template <typename Scale>
Tensor sumPerToken(const Tensor &rows, const Grouping &g, const Shape &shape, int64_t topK,
                   Scale scale) {
  const int64_t hidden = shape.back(), tokens = numElements(shape) / hidden;
  Tensor out = Tensor::uninitialized(DType::F32, shape);
  const float *in = rows.data<float>();
  float *o = out.mutableData<float>();
#pragma omp parallel if (tokens * hidden > (1 << 16))
  {
    std::vector<int64_t> pos(topK);
#pragma omp for schedule(static)
    for (int64_t t = 0; t < tokens; ++t) {
      float *row = o + t * hidden;
      std::fill(row, row + hidden, 0.0f);
      int64_t n = positionsOfToken(g, t, topK, pos.data());
      for (int64_t q = 0; q < n; ++q) {
        const int64_t p = pos[q];
        const float c = scale(g.pair[p]), *r = in + p * hidden;
        for (int64_t h = 0; h < hidden; ++h)
          row[h] += c * r[h];
      }
    }
  }
  return out;
}
} // namespace

RouterOutputs router(const Tensor &logits, int64_t topK, bool normalize, const Tensor *bias) {
  const int64_t numExperts = logits.shape().back(), rows = rowsOf(logits);
  if (topK < 1 || topK > numExperts)
    fail("router: top-k {} is outside [1, {}] (the number of experts)", topK, numExperts);
  RouterOutputs out{Tensor::uninitialized(DType::F32, withLastDim(logits.shape(), topK)),
                    Tensor::uninitialized(DType::I64, withLastDim(logits.shape(), topK)),
                    Tensor::uninitialized(DType::F32, logits.shape())};
  const float *l = logits.data<float>();
  float *probs = out.probs.mutableData<float>(), *weights = out.weights.mutableData<float>();
  int64_t *ids = out.experts.mutableData<int64_t>();
  const float *b = bias ? bias->data<float>() : nullptr;
#pragma omp parallel if (rows * numExperts > (1 << 14))
  {
    std::vector<char> taken(numExperts);
    std::vector<float> score(numExperts);
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      const float *row = l + r * numExperts;
      float *p = probs + r * numExperts, *w = weights + r * topK;
      int64_t *sel = ids + r * topK;
      // Softmax as torch computes it in float32; a NaN max (as torch's)
      // makes the whole row NaN.
      float mx = row[0];
      for (int64_t e = 1; e < numExperts; ++e)
        mx = std::isnan(row[e]) || row[e] > mx ? row[e] : mx;
      // torch sums the exponentials in float and multiplies by the
      // reciprocal of the sum.
      float sum = 0;
      for (int64_t e = 0; e < numExperts; ++e)
        sum += (p[e] = std::exp(row[e] - mx));
      const float inverse = 1.0f / sum;
      for (int64_t e = 0; e < numExperts; ++e)
        p[e] *= inverse;
      // Selection by probs + bias (torchtitan's expert bias; the weights
      // stay the probabilities). k is small: k selection passes beat a sort.
      for (int64_t e = 0; e < numExperts; ++e)
        score[e] = b ? p[e] + b[e] : p[e];
      std::fill(taken.begin(), taken.end(), 0);
      float selected = 0.0f;
      for (int64_t j = 0; j < topK; ++j) {
        int64_t best = -1;
        for (int64_t e = 0; e < numExperts; ++e)
          if (!taken[e] && (best < 0 || ranksAbove(score[e], score[best])))
            best = e;
        taken[best] = 1;
        sel[j] = best;
        w[j] = p[best];
        selected += p[best];
      }
      // torch: routing_weights /= routing_weights.sum(-1), in float32.
      if (normalize)
        for (int64_t j = 0; j < topK; ++j)
          w[j] /= selected;
    }
  }
  return out;
}

Tensor routerBackward(const Tensor &probs, const Tensor &experts, const Tensor &dWeights,
                      const Tensor *dProbs, bool normalize) {
  const int64_t numExperts = probs.shape().back(), rows = rowsOf(probs),
                topK = experts.shape().back();
  checkIds(experts, numExperts, "expert id");
  Tensor dlogits = Tensor::uninitialized(DType::F32, probs.shape());
  const float *pAll = probs.data<float>(), *dwAll = dWeights.data<float>();
  const float *dpAll = dProbs ? dProbs->data<float>() : nullptr;
  float *out = dlogits.mutableData<float>();
#pragma omp parallel if (rows * numExperts > (1 << 14))
  {
    std::vector<double> dp(numExperts);
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      const float *p = pAll + r * numExperts, *dw = dwAll + r * topK;
      for (int64_t e = 0; e < numExperts; ++e)
        dp[e] = dpAll ? dpAll[r * numExperts + e] : 0.0;
      // w_j = s_j / S with S = sum_i s_i: ds_j = (dw_j - sum_i dw_i w_i) / S.
      double total = 0, dwDotW = 0;
      for (int64_t j = 0; j < topK; ++j)
        total += p[idAt(experts, r * topK + j)];
      if (normalize)
        for (int64_t j = 0; j < topK; ++j)
          dwDotW += double(dw[j]) * p[idAt(experts, r * topK + j)] / total;
      for (int64_t j = 0; j < topK; ++j)
        dp[idAt(experts, r * topK + j)] += normalize ? (dw[j] - dwDotW) / total : dw[j];
      // Softmax VJP: p * (dp - <dp, p>).
      double dot = 0;
      for (int64_t e = 0; e < numExperts; ++e)
        dot += dp[e] * p[e];
      for (int64_t e = 0; e < numExperts; ++e)
        out[r * numExperts + e] = float(p[e] * (dp[e] - dot));
    }
  }
  return dlogits;
}

Tensor groupedExperts(const Tensor &x, const Tensor &weights, const Tensor &experts,
                      const Tensor &w1, const Tensor &w3, const Tensor &w2, ExpertShard shard,
                      DType round) {
  const int64_t topK = experts.shape().back();
  Grouping g = groupByExpert(experts, w1.dim(0), shard);
  Tensor xs = gatherRows(x, g, topK, [](int64_t) { return 1.0f; });
  Tensor y = runExperts(xs, g, w1, w3, w2, round).y;
  const float *w = weights.data<float>();
  return sumPerToken(y, g, x.shape(), topK, [w](int64_t pair) { return w[pair]; });
}

GroupedExpertsGrads groupedExpertsBackward(const Tensor &dout, const Tensor &x,
                                           const Tensor &weights, const Tensor &experts,
                                           const Tensor &w1, const Tensor &w3,
                                           const Tensor &w2, ExpertShard shard, DType round) {
  const int64_t hidden = x.shape().back(), topK = experts.shape().back(),
                numExperts = w1.dim(0),
                inter = w1.dim(1), pairs = experts.numel();
  Grouping g = groupByExpert(experts, numExperts, shard);
  const int64_t local = int64_t(g.pair.size());
  const float *w = weights.data<float>(), *dy = dout.data<float>();
  Tensor xs = gatherRows(x, g, topK, [](int64_t) { return 1.0f; });
  // d Y of pair (t, j) = weights[t, j] * dout[t].
  Tensor dys = rounded(gatherRows(dout, g, topK, [&](int64_t i) { return w[i]; }), round);
  ExpertActivations a = runExperts(xs, g, w1, w3, w2, round);

  GroupedExpertsGrads grads{Tensor::uninitialized(DType::F32, x.shape()),
                            Tensor::uninitialized(DType::F32, weights.shape()),
                            Tensor::uninitialized(DType::F32, w1.shape()),
                            Tensor::uninitialized(DType::F32, w3.shape()),
                            Tensor::uninitialized(DType::F32, w2.shape())};
  // d weights[t, j] = dout[t] . Y of pair (t, j); 0 for another shard's.
  float *dw = grads.weights.mutableData<float>();
  const float *ys = a.y.data<float>();
#pragma omp parallel for schedule(static) if (pairs * hidden > (1 << 16))
  for (int64_t i = 0; i < pairs; ++i) {
    if (g.at[i] < 0) {
      dw[i] = 0.0f;
      continue;
    }
    const float *yr = ys + g.at[i] * hidden, *dr = dy + i / topK * hidden;
    double dot = 0;
    for (int64_t h = 0; h < hidden; ++h)
      dot += double(dr[h]) * yr[h];
    dw[i] = float(dot);
  }

  // Experts without tokens get no GEMM: their gradients are zero.
  float *dw1 = grads.w1.mutableData<float>(), *dw3 = grads.w3.mutableData<float>(),
        *dw2 = grads.w2.mutableData<float>();
  const int64_t block = inter * hidden;
  for (int64_t e = 0; e < numExperts; ++e)
    if (g.size(e) == 0) {
      std::fill_n(dw1 + e * block, block, 0.0f);
      std::fill_n(dw3 + e * block, block, 0.0f);
      std::fill_n(dw2 + e * block, block, 0.0f);
    }

  // dA = dY w2_e [n, I]; dw2_e = dY^T A [H, I].
  Tensor dact = Tensor::uninitialized(DType::F32, {local, inter});
  g.forEachExpert([&](int64_t e, int64_t s, int64_t n) {
    const float *d = dys.data<float>() + s * hidden;
    gemm(false, false, n, inter, hidden, d, w2.data<float>() + e * block, 0.0f,
         dact.mutableData<float>() + s * inter);
    gemm(true, false, hidden, inter, n, d, a.act.data<float>() + s * inter, 0.0f,
         dw2 + e * block);
  });
  auto [dgate, dup] = swigluBackward(rounded(std::move(dact), round), a.gate, a.up);
  dgate = rounded(std::move(dgate), round);
  dup = rounded(std::move(dup), round);

  // dw1_e = dG^T X, dw3_e = dU^T X [I, H]; dX = dG w1_e + dU w3_e [n, H],
  // written over Y (no longer needed).
  Tensor dxs = a.y;
  g.forEachExpert([&](int64_t e, int64_t s, int64_t n) {
    const float *dg = dgate.data<float>() + s * inter, *du = dup.data<float>() + s * inter,
                *xr = xs.data<float>() + s * hidden;
    float *dx = dxs.mutableData<float>() + s * hidden;
    gemm(true, false, inter, hidden, n, dg, xr, 0.0f, dw1 + e * block);
    gemm(true, false, inter, hidden, n, du, xr, 0.0f, dw3 + e * block);
    gemm(false, false, n, hidden, inter, dg, w1.data<float>() + e * block, 0.0f, dx);
    gemm(false, false, n, hidden, inter, du, w3.data<float>() + e * block, 1.0f, dx);
  });

  grads.x = sumPerToken(dxs, g, x.shape(), topK, [](int64_t) { return 1.0f; });
  return grads;
}

namespace {
/// count_e over every layer's selected ids, and the total token count N.
std::vector<double> expertCounts(const std::vector<Tensor> &experts, int64_t numExperts,
                                 int64_t &tokens) {
  std::vector<double> counts(numExperts, 0.0);
  tokens = 0;
  for (const Tensor &ids : experts) {
    checkIds(ids, numExperts, "expert id");
    for (int64_t i = 0, n = ids.numel(); i < n; ++i)
      counts[idAt(ids, i)] += 1;
    tokens += rowsOf(ids); // one row of k ids per token
  }
  return counts;
}
} // namespace

Tensor loadBalancingLoss(const std::vector<Tensor> &probs, const std::vector<Tensor> &experts) {
  if (probs.empty() || probs.size() != experts.size())
    fail("load balancing loss: {} probability tensors for {} expert id tensors",
         probs.size(), experts.size());
  const int64_t numExperts = probs[0].shape().back();
  int64_t tokens;
  std::vector<double> counts = expertCounts(experts, numExperts, tokens);
  std::vector<double> probSum(numExperts, 0.0);
  for (const Tensor &p : probs) {
    const float *ps = p.data<float>();
    for (int64_t r = 0, rows = rowsOf(p); r < rows; ++r)
      for (int64_t e = 0; e < numExperts; ++e)
        probSum[e] += ps[r * numExperts + e];
  }
  double loss = 0;
  for (int64_t e = 0; e < numExperts; ++e)
    loss += counts[e] / tokens * (probSum[e] / tokens);
  Tensor out(DType::F32, {});
  *out.mutableData<float>() = float(numExperts * loss);
  return out;
}

std::vector<Tensor> loadBalancingLossBackward(const Tensor &dloss,
                                              const std::vector<Tensor> &experts,
                                              int64_t numExperts) {
  if (experts.empty())
    fail("load balancing loss: no expert id tensors");
  int64_t tokens;
  std::vector<double> counts = expertCounts(experts, numExperts, tokens);
  // Every token's row gets the same gradient: dloss * E * count_e / N^2.
  std::vector<float> rowGrad(numExperts);
  const double scale = double(*dloss.data<float>()) * numExperts / (double(tokens) * tokens);
  for (int64_t e = 0; e < numExperts; ++e)
    rowGrad[e] = float(scale * counts[e]);
  std::vector<Tensor> grads;
  for (const Tensor &ids : experts) {
    Tensor d = Tensor::uninitialized(DType::F32, withLastDim(ids.shape(), numExperts));
    float *ds = d.mutableData<float>();
    for (int64_t r = 0, rows = rowsOf(ids); r < rows; ++r)
      std::copy(rowGrad.begin(), rowGrad.end(), ds + r * numExperts);
    grads.push_back(d);
  }
  return grads;
}

Tensor expertBiasUpdate(const Tensor &bias, const std::vector<Tensor> &experts, double coeff) {
  const int64_t numExperts = bias.numel();
  // torchtitan, in float32: tokens per expert (histc) over the step's
  // microbatches, then delta = coeff * sign(mean - tokens), centred, added
  // to the bias.
  std::vector<float> tokens(numExperts, 0.0f);
  for (const Tensor &ids : experts) {
    checkIds(ids, numExperts, "expert id");
    for (int64_t i = 0, n = ids.numel(); i < n; ++i)
      tokens[idAt(ids, i)] += 1.0f;
  }
  float mean = 0.0f;
  for (float t : tokens)
    mean += t;
  mean /= float(numExperts);
  std::vector<float> delta(numExperts);
  float deltaMean = 0.0f;
  for (int64_t e = 0; e < numExperts; ++e) {
    float gap = mean - tokens[e];
    delta[e] = float(coeff) * float((gap > 0) - (gap < 0));
    deltaMean += delta[e];
  }
  deltaMean /= float(numExperts);
  Tensor out = Tensor::uninitialized(DType::F32, bias.shape());
  for (int64_t e = 0; e < numExperts; ++e)
    out.mutableData<float>()[e] = bias.data<float>()[e] + (delta[e] - deltaMean);
  return out;
}

} // namespace kiln::kernels
