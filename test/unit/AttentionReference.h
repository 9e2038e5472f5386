//===- AttentionReference.h - Attention in float64, for tests ---*- C++ -*-===//
//
// Naive GQA attention and its VJP from the definition, in double: what the
// float32 kernels, the HLO lowering and context-parallel blocks are checked
// against. The causal mask compares true positions, so a block of queries
// or a permuted sequence is checked by passing where each row stands.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_TEST_UNIT_ATTENTIONREFERENCE_H
#define KILN_TEST_UNIT_ATTENTIONREFERENCE_H

#include "TestUtil.h"

#include <numeric>

namespace kiln::test {

struct AttentionReference {
  std::vector<double> out, lse, dq, dk, dv;
};

/// q [B, Sq, H, D], k and v [B, Sk, KV, D], dout like q (or null: forward
/// only). Causal: query row i sees key row j iff keyPos[j] <= queryPos[i];
/// empty positions are 0, 1, ... (a whole sequence in natural order).
inline AttentionReference attentionReference(const Tensor &q, const Tensor &k, const Tensor &v,
                                             const Tensor *dout, bool causal, double scale,
                                             std::vector<int64_t> queryPos = {},
                                             std::vector<int64_t> keyPos = {}) {
  int64_t B = q.dim(0), Sq = q.dim(1), H = q.dim(2), D = q.dim(3), Sk = k.dim(1), KV = k.dim(2);
  if (queryPos.empty()) {
    queryPos.resize(Sq);
    std::iota(queryPos.begin(), queryPos.end(), 0);
  }
  if (keyPos.empty()) {
    keyPos.resize(Sk);
    std::iota(keyPos.begin(), keyPos.end(), 0);
  }
  auto qs = toDoubles(q), ks = toDoubles(k), vs = toDoubles(v);
  std::vector<double> dos = dout ? toDoubles(*dout) : std::vector<double>(qs.size());
  AttentionReference r{std::vector<double>(qs.size()), std::vector<double>(B * H * Sq),
                       std::vector<double>(qs.size()), std::vector<double>(ks.size()),
                       std::vector<double>(vs.size())};
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < Sq; ++i) {
        int64_t qi = ((b * Sq + i) * H + h) * D;
        auto kvAt = [&](int64_t j) { return ((b * Sk + j) * KV + h / (H / KV)) * D; };
        std::vector<int64_t> seen;
        for (int64_t j = 0; j < Sk; ++j)
          if (!causal || keyPos[j] <= queryPos[i])
            seen.push_back(j);
        std::vector<double> p(seen.size()), dp(seen.size());
        for (size_t n = 0; n < seen.size(); ++n)
          for (int64_t e = 0; e < D; ++e) {
            p[n] += scale * qs[qi + e] * ks[kvAt(seen[n]) + e];
            dp[n] += dos[qi + e] * vs[kvAt(seen[n]) + e];
          }
        double mx = *std::max_element(p.begin(), p.end()), sum = 0, di = 0;
        for (double &pn : p)
          sum += (pn = std::exp(pn - mx));
        r.lse[(b * H + h) * Sq + i] = mx + std::log(sum);
        for (size_t n = 0; n < seen.size(); ++n) {
          di += (p[n] /= sum) * dp[n];
          for (int64_t e = 0; e < D; ++e)
            r.out[qi + e] += p[n] * vs[kvAt(seen[n]) + e];
        }
        for (size_t n = 0; n < seen.size(); ++n) {
          double ds = p[n] * (dp[n] - di);
          for (int64_t e = 0; e < D; ++e) {
            r.dq[qi + e] += scale * ds * ks[kvAt(seen[n]) + e];
            r.dk[kvAt(seen[n]) + e] += scale * ds * qs[qi + e];
            r.dv[kvAt(seen[n]) + e] += p[n] * dos[qi + e];
          }
        }
      }
  return r;
}

} // namespace kiln::test

#endif // KILN_TEST_UNIT_ATTENTIONREFERENCE_H
