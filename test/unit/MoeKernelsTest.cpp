//===- MoeKernelsTest.cpp - MoE router, experts and aux loss vs references ===//
//
// Each kernel of MoeKernels.h is compared with a naive float64 reference
// written here from the Hugging Face formulas (per-token softmax and top-k,
// per-token per-slot matrix-vector products, load_balancing_loss_func), and
// each VJP with central finite differences of that reference. The top-k
// choice is not differentiable: the references take the kernel's selected
// ids as given, so a perturbation cannot change them.
//
//===----------------------------------------------------------------------===//

#include "TestUtil.h"
#include "kiln/Runtime/BackwardKernels.h"
#include "kiln/Runtime/ForwardKernels.h"
#include "kiln/Runtime/ExpertDispatchKernels.h"
#include "kiln/Runtime/MoeKernels.h"

#include <functional>
#include <numeric>

using namespace kiln;
using namespace kiln::test;

namespace {

/// Float32 kernels against float64 references: |got - want| <= kTol *
/// max(1, |want|) (rounding through short float32 reductions).
constexpr double kTol = 1e-5;

using Vec = std::vector<double>;

Tensor idTensor(Shape shape, const std::vector<int64_t> &ids) {
  Tensor t(DType::I64, std::move(shape));
  std::copy(ids.begin(), ids.end(), t.mutableData<int64_t>());
  return t;
}

std::vector<int64_t> idsOf(const Tensor &t) {
  return std::vector<int64_t>(t.data<int64_t>(), t.data<int64_t>() + t.numel());
}

Tensor scalar(float value) {
  Tensor t(DType::F32, {});
  *t.mutableData<float>() = value;
  return t;
}

void expectClose(const std::string &what, const Tensor &got, const Vec &want) {
  Vec g = toDoubles(got);
  ASSERT_EQ(g.size(), want.size()) << what;
  double worst = 0;
  size_t worstAt = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    double err = std::abs(g[i] - want[i]) / std::max(1.0, std::abs(want[i]));
    if (err > worst)
      worst = err, worstAt = i;
  }
  EXPECT_LE(worst, kTol) << what << ": worst element " << worstAt << " got " << g[worstAt]
                         << " want " << want[worstAt];
}

/// Central differences of the scalar f at x, in double (truncation and
/// rounding both far below kTol).
Vec numericGradient(const std::function<double(const Vec &)> &f, Vec x, double h = 1e-5) {
  Vec grad(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    double orig = x[i];
    x[i] = orig + h;
    double up = f(x);
    x[i] = orig - h;
    double down = f(x);
    x[i] = orig;
    grad[i] = (up - down) / (2 * h);
  }
  return grad;
}

double dot(const Vec &a, const Vec &b) {
  return std::inner_product(a.begin(), a.end(), b.begin(), 0.0);
}

// --- Float64 references -----------------------------------------------------

Vec softmaxRows(const Vec &logits, int64_t experts) {
  Vec p(logits.size());
  for (size_t r = 0; r < logits.size() / experts; ++r) {
    const double *l = logits.data() + r * experts;
    double mx = *std::max_element(l, l + experts), sum = 0;
    for (int64_t e = 0; e < experts; ++e)
      sum += (p[r * experts + e] = std::exp(l[e] - mx));
    for (int64_t e = 0; e < experts; ++e)
      p[r * experts + e] /= sum;
  }
  return p;
}

/// Top-k ids per row by descending probability, ties to the lower id.
std::vector<int64_t> topKRows(const Vec &probs, int64_t experts, int64_t k) {
  std::vector<int64_t> ids;
  for (size_t r = 0; r < probs.size() / experts; ++r) {
    std::vector<int64_t> order(experts);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
      return probs[r * experts + a] > probs[r * experts + b];
    });
    ids.insert(ids.end(), order.begin(), order.begin() + k);
  }
  return ids;
}

/// The routing weights for given selected ids (the selection held fixed).
Vec routingWeights(const Vec &probs, const std::vector<int64_t> &ids, int64_t experts,
                   int64_t k, bool normalize) {
  Vec w(ids.size());
  for (size_t r = 0; r < ids.size() / k; ++r) {
    double sum = 0;
    for (int64_t j = 0; j < k; ++j)
      sum += (w[r * k + j] = probs[r * experts + ids[r * k + j]]);
    if (normalize)
      for (int64_t j = 0; j < k; ++j)
        w[r * k + j] /= sum;
  }
  return w;
}

struct Dims {
  int64_t tokens, hidden, inter, experts, k;
};

/// out[t] = sum_j w[t, j] * w2_e (silu(w1_e x_t) * (w3_e x_t)), one
/// matrix-vector product per (token, slot).
Vec expertsReference(const Dims &d, const Vec &x, const Vec &w, const std::vector<int64_t> &ids,
                     const Vec &w1, const Vec &w3, const Vec &w2) {
  Vec out(d.tokens * d.hidden), act(d.inter);
  for (int64_t t = 0; t < d.tokens; ++t)
    for (int64_t j = 0; j < d.k; ++j) {
      int64_t e = ids[t * d.k + j];
      for (int64_t i = 0; i < d.inter; ++i) {
        double g = 0, u = 0;
        for (int64_t h = 0; h < d.hidden; ++h) {
          g += w1[(e * d.inter + i) * d.hidden + h] * x[t * d.hidden + h];
          u += w3[(e * d.inter + i) * d.hidden + h] * x[t * d.hidden + h];
        }
        act[i] = g / (1 + std::exp(-g)) * u;
      }
      for (int64_t h = 0; h < d.hidden; ++h) {
        double y = 0;
        for (int64_t i = 0; i < d.inter; ++i)
          y += w2[(e * d.hidden + h) * d.inter + i] * act[i];
        out[t * d.hidden + h] += w[t * d.k + j] * y;
      }
    }
  return out;
}

/// HF's load_balancing_loss_func on the concatenated layers:
/// tokens_per_expert = mean over tokens of one_hot(selected) [k, E],
/// router_prob_per_expert = mean over tokens of probs [E],
/// loss = E * sum(tokens_per_expert * router_prob_per_expert).
double loadBalancingReference(const Vec &probs, const std::vector<int64_t> &ids,
                              int64_t experts, int64_t k) {
  int64_t n = int64_t(probs.size()) / experts;
  Vec tokensPerExpert(k * experts), probPerExpert(experts);
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t j = 0; j < k; ++j)
      tokensPerExpert[j * experts + ids[t * k + j]] += 1.0 / n;
    for (int64_t e = 0; e < experts; ++e)
      probPerExpert[e] += probs[t * experts + e] / n;
  }
  double loss = 0;
  for (int64_t j = 0; j < k; ++j)
    for (int64_t e = 0; e < experts; ++e)
      loss += tokensPerExpert[j * experts + e] * probPerExpert[e];
  return loss * experts;
}

/// Router logits whose probabilities are well apart: each row is a random
/// permutation of 0, 0.8, 1.6, ... plus noise below 0.1.
Tensor separatedLogits(Shape shape, std::mt19937 &rng) {
  Tensor t(DType::F32, shape);
  int64_t experts = shape.back();
  std::uniform_real_distribution<float> noise(-0.05f, 0.05f);
  float *p = t.mutableData<float>();
  for (int64_t r = 0; r < t.numel() / experts; ++r) {
    std::vector<int64_t> order(experts);
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    for (int64_t e = 0; e < experts; ++e)
      p[r * experts + e] = 0.8f * order[e] - 1.5f + noise(rng);
  }
  return t;
}

/// Expert weights and inputs at a scale where silu is far from linear.
struct ExpertCase {
  Dims d;
  Tensor x, w1, w3, w2;
  ExpertCase(Dims dims, std::mt19937 &rng)
      : d(dims), x(randomTensor({2, d.tokens / 2, d.hidden}, rng)),
        w1(randomTensor({d.experts, d.inter, d.hidden}, rng, 0.5f)),
        w3(randomTensor({d.experts, d.inter, d.hidden}, rng, 0.5f)),
        w2(randomTensor({d.experts, d.hidden, d.inter}, rng, 0.5f)) {}

  Vec reference(const Tensor &weights, const Tensor &ids) const {
    return expertsReference(d, toDoubles(x), toDoubles(weights), idsOf(ids), toDoubles(w1),
                            toDoubles(w3), toDoubles(w2));
  }
  Tensor run(const Tensor &weights, const Tensor &ids) const {
    return kernels::groupedExperts(x, weights, ids, w1, w3, w2);
  }
};

const Dims kDims{10, 8, 6, 4, 2};

// --- Router -----------------------------------------------------------------

TEST(MoeKernelsTest, RouterMatchesFloat64Reference) {
  std::mt19937 rng(31);
  Tensor logits = randomTensor({2, 5, 4}, rng, 2.0f);
  Vec probs = softmaxRows(toDoubles(logits), 4);
  std::vector<int64_t> ids = topKRows(probs, 4, 2);
  for (bool normalize : {true, false}) {
    SCOPED_TRACE(normalize ? "normalized" : "raw");
    kernels::RouterOutputs out = kernels::router(logits, 2, normalize);
    EXPECT_EQ(out.probs.shape(), logits.shape());
    EXPECT_EQ(out.weights.shape(), (Shape{2, 5, 2}));
    EXPECT_EQ(out.experts.dtype(), DType::I64);
    EXPECT_EQ(idsOf(out.experts), ids);
    expectClose("probs", out.probs, probs);
    expectClose("weights", out.weights, routingWeights(probs, ids, 4, 2, normalize));
  }
}

TEST(MoeKernelsTest, RouterTiesSelectTheLowerExpertFirst) {
  Tensor logits(DType::F32, {3, 4});
  std::vector<float> values = {1, 3, 3, 0, /**/ 2, 2, 2, 2, /**/ 0, 5, 1, 5};
  std::copy(values.begin(), values.end(), logits.mutableData<float>());
  kernels::RouterOutputs out = kernels::router(logits, 2, true);
  EXPECT_EQ(idsOf(out.experts), (std::vector<int64_t>{1, 2, 0, 1, 1, 3}));
  for (int i = 0; i < 6; ++i)
    EXPECT_EQ(out.weights.data<float>()[i], 0.5f) << i;
}

// torchtitan's aux-loss-free balancing: the bias steers the choice only.
TEST(MoeKernelsTest, RouterExpertBiasSteersSelectionNotWeights) {
  Tensor logits(DType::F32, {1, 4});
  std::vector<float> values = {3, 2, 1, 0};
  std::copy(values.begin(), values.end(), logits.mutableData<float>());
  Tensor bias(DType::F32, {4});
  std::vector<float> b = {0, -1, 0, 1}; // demote expert 1, promote expert 3
  std::copy(b.begin(), b.end(), bias.mutableData<float>());
  kernels::RouterOutputs plain = kernels::router(logits, 2, false);
  kernels::RouterOutputs biased = kernels::router(logits, 2, false, &bias);
  EXPECT_EQ(idsOf(plain.experts), (std::vector<int64_t>{0, 1}));
  // p = softmax(3, 2, 1, 0) = (.644, .237, .087, .032); + bias: (.644, -.763, .087, 1.032).
  EXPECT_EQ(idsOf(biased.experts), (std::vector<int64_t>{3, 0}));
  EXPECT_EQ(biased.weights.data<float>()[0], plain.probs.data<float>()[3]);
  EXPECT_EQ(biased.weights.data<float>()[1], plain.probs.data<float>()[0]);
  for (int e = 0; e < 4; ++e)
    EXPECT_EQ(biased.probs.data<float>()[e], plain.probs.data<float>()[e]);
}

TEST(MoeKernelsTest, ExpertBiasUpdateFollowsTheLoad) {
  // 3 tokens x top-2 over 4 experts: loads (3, 2, 1, 0), mean 1.5.
  Tensor ids = idTensor({3, 2}, {0, 1, 0, 2, 0, 1});
  Tensor bias(DType::F32, {4});
  std::vector<float> b = {0.5f, 0, 0, -0.5f};
  std::copy(b.begin(), b.end(), bias.mutableData<float>());
  // sign(mean - load) = (-1, -1, +1, +1), already centred: delta = 0.1 x that.
  Tensor updated = kernels::expertBiasUpdate(bias, {ids}, 0.1);
  std::vector<float> want = {0.4f, -0.1f, 0.1f, -0.4f};
  for (int e = 0; e < 4; ++e)
    EXPECT_NEAR(updated.data<float>()[e], want[e], 1e-7) << e;
  // Balanced on average but uneven signs: (2, 2, 2, 0) -> mean 1.5, signs
  // (-1, -1, -1, +1), mean -0.5: centred delta = 0.1 x (-0.5, -0.5, -0.5, 1.5).
  Tensor skewed = kernels::expertBiasUpdate(Tensor(DType::F32, {4}),
                                            {idTensor({3, 2}, {0, 1, 1, 2, 0, 2})}, 0.1);
  std::vector<float> centred = {-0.05f, -0.05f, -0.05f, 0.15f};
  for (int e = 0; e < 4; ++e)
    EXPECT_NEAR(skewed.data<float>()[e], centred[e], 1e-7) << e;
  // Two microbatches' routings count as one: the same tokens in 2 + 1 rows.
  Tensor split = kernels::expertBiasUpdate(
      bias, {idTensor({2, 2}, {0, 1, 0, 2}), idTensor({1, 2}, {0, 1})}, 0.1);
  for (int e = 0; e < 4; ++e)
    EXPECT_NEAR(split.data<float>()[e], want[e], 1e-7) << e;
  expectError([&] { kernels::expertBiasUpdate(bias, {ids, idTensor({1, 2}, {0, 4})}, 0.1); },
              {"expert id 4"});
}

TEST(MoeKernelsTest, RouterBackwardMatchesFiniteDifferences) {
  std::mt19937 rng(32);
  Tensor logits = separatedLogits({2, 5, 4}, rng);
  Tensor dWeights = randomTensor({2, 5, 2}, rng), dProbs = randomTensor({2, 5, 4}, rng);
  for (bool normalize : {true, false})
    for (bool withDProbs : {false, true}) {
      SCOPED_TRACE(std::string(normalize ? "normalized" : "raw") +
                   (withDProbs ? ", with dprobs" : ", no dprobs"));
      kernels::RouterOutputs out = kernels::router(logits, 2, normalize);
      std::vector<int64_t> ids = idsOf(out.experts);
      Tensor dlogits = kernels::routerBackward(out.probs, out.experts, dWeights,
                                               withDProbs ? &dProbs : nullptr, normalize);
      // L = dWeights . weights (+ dProbs . probs), the selection held fixed.
      auto loss = [&](const Vec &l) {
        Vec p = softmaxRows(l, 4);
        double sum = dot(toDoubles(dWeights), routingWeights(p, ids, 4, 2, normalize));
        return withDProbs ? sum + dot(toDoubles(dProbs), p) : sum;
      };
      expectClose("dlogits", dlogits, numericGradient(loss, toDoubles(logits)));
    }
}

// --- Grouped experts --------------------------------------------------------

TEST(MoeKernelsTest, GroupedExpertsMatchesFloat64Reference) {
  std::mt19937 rng(33);
  ExpertCase c(kDims, rng);
  kernels::RouterOutputs r = kernels::router(randomTensor({2, 5, 4}, rng, 2.0f), 2, true);
  Tensor out = c.run(r.weights, r.experts);
  EXPECT_EQ(out.shape(), c.x.shape());
  expectClose("out", out, c.reference(r.weights, r.experts));

  // I32 ids, and a token that picks the same expert twice (each slot counts).
  Tensor ids32(DType::I32, {2, 5, 2});
  std::vector<int32_t> ids = {0, 3, 2, 2, 1, 0, 3, 1, 1, 1, 0, 2, 2, 0, 3, 3, 1, 2, 0, 1};
  std::copy(ids.begin(), ids.end(), ids32.mutableData<int32_t>());
  Tensor ids64 = idTensor({2, 5, 2}, std::vector<int64_t>(ids.begin(), ids.end()));
  expectClose("out, repeated ids", c.run(r.weights, ids32), c.reference(r.weights, ids64));
}

TEST(MoeKernelsTest, GroupedExpertsHasNoCapacityLimit) {
  // Expert 0 takes every token, in either slot; expert 3 none.
  std::mt19937 rng(34);
  ExpertCase c(kDims, rng);
  Tensor weights = randomTensor({2, 5, 2}, rng);
  Tensor ids = idTensor({2, 5, 2}, {0, 1, 2, 0, 0, 2, 1, 0, 0, 1, 0, 2, 2, 0, 0, 1, 1, 0, 0, 2});
  expectClose("out", c.run(weights, ids), c.reference(weights, ids));
}

TEST(MoeKernelsTest, GroupedExpertsSumsSlotsInAscendingExpertOrder) {
  // H = I = 1 and gate 100 (silu(100) = 100 in float): every expert outputs
  // exactly 100. Weights 1, 1e8, -1e8 for experts 0, 1, 2 given in slot
  // order 1, 2, 0: HF's order gives (100 + 1e10) - 1e10 = 0 in float (100 is
  // below half an ulp of 1e10), slot order 1e10 - 1e10 + 100 = 100.
  Tensor x(DType::F32, {1, 1}), weights(DType::F32, {1, 3});
  Tensor w1(DType::F32, {3, 1, 1}), w3(DType::F32, {3, 1, 1}), w2(DType::F32, {3, 1, 1});
  x.mutableData<float>()[0] = 1.0f;
  for (int e = 0; e < 3; ++e)
    w1.mutableData<float>()[e] = 100.0f, w3.mutableData<float>()[e] = 1.0f,
    w2.mutableData<float>()[e] = 1.0f;
  std::vector<float> w = {1e8f, -1e8f, 1.0f};
  std::copy(w.begin(), w.end(), weights.mutableData<float>());
  Tensor out = kernels::groupedExperts(x, weights, idTensor({1, 3}, {1, 2, 0}), w1, w3, w2);
  EXPECT_EQ(out.data<float>()[0], 0.0f);
}

TEST(MoeKernelsTest, GroupedExpertsBackwardMatchesFiniteDifferences) {
  std::mt19937 rng(35);
  ExpertCase c(kDims, rng);
  kernels::RouterOutputs r = kernels::router(randomTensor({2, 5, 4}, rng, 2.0f), 2, true);
  Tensor dout = randomTensor(c.x.shape(), rng);
  kernels::GroupedExpertsGrads grads =
      kernels::groupedExpertsBackward(dout, c.x, r.weights, r.experts, c.w1, c.w3, c.w2);
  const Vec dy = toDoubles(dout);
  Vec x = toDoubles(c.x), w = toDoubles(r.weights), w1 = toDoubles(c.w1),
      w3 = toDoubles(c.w3), w2 = toDoubles(c.w2);
  std::vector<int64_t> ids = idsOf(r.experts);
  // L = dout . out as a function of one operand, the others fixed.
  auto lossOf = [&](Vec &operand) {
    return [&, op = &operand](const Vec &v) {
      Vec saved = *op;
      *op = v;
      double loss = dot(dy, expertsReference(c.d, x, w, ids, w1, w3, w2));
      *op = saved;
      return loss;
    };
  };
  expectClose("dx", grads.x, numericGradient(lossOf(x), x));
  expectClose("dweights", grads.weights, numericGradient(lossOf(w), w));
  expectClose("dw1", grads.w1, numericGradient(lossOf(w1), w1));
  expectClose("dw3", grads.w3, numericGradient(lossOf(w3), w3));
  expectClose("dw2", grads.w2, numericGradient(lossOf(w2), w2));
}

TEST(MoeKernelsTest, GroupedExpertsBackwardGivesUnusedExpertsZeroGradients) {
  // Expert 0 takes every token and expert 2 none; repeated ids in token 4.
  std::mt19937 rng(36);
  ExpertCase c(kDims, rng);
  Tensor weights = randomTensor({2, 5, 2}, rng), dout = randomTensor(c.x.shape(), rng);
  Tensor ids = idTensor({2, 5, 2}, {0, 1, 3, 0, 0, 3, 1, 0, 0, 0, 0, 1, 0, 3, 0, 1, 1, 0, 3, 0});
  kernels::GroupedExpertsGrads grads =
      kernels::groupedExpertsBackward(dout, c.x, weights, ids, c.w1, c.w3, c.w2);
  const int64_t block = kDims.inter * kDims.hidden;
  for (const Tensor *g : {&grads.w1, &grads.w3, &grads.w2})
    for (int64_t e = 0; e < kDims.experts; ++e) {
      const float *p = g->data<float>() + e * block;
      bool allZero = std::all_of(p, p + block, [](float v) { return v == 0.0f; });
      EXPECT_EQ(allZero, e == 2) << "expert " << e;
    }
  // The used experts' gradients still match the reference.
  Vec x = toDoubles(c.x), w = toDoubles(weights), w2 = toDoubles(c.w2);
  auto loss = [&](const Vec &v) {
    return dot(toDoubles(dout), expertsReference(c.d, x, w, idsOf(ids), toDoubles(c.w1),
                                                 toDoubles(c.w3), v));
  };
  expectClose("dw2", grads.w2, numericGradient(loss, w2));
}

TEST(MoeKernelsTest, GroupedExpertsRejectsOutOfRangeExpertIds) {
  std::mt19937 rng(37);
  ExpertCase c({2, 8, 6, 4, 2}, rng);
  Tensor weights = randomTensor({2, 1, 2}, rng), dout = randomTensor(c.x.shape(), rng);
  expectError([&] { c.run(weights, idTensor({2, 1, 2}, {0, 1, 2, 4})); },
              {"expert id 4", "position 3", "[0, 4)"});
  expectError([&] { c.run(weights, idTensor({2, 1, 2}, {-2, 1, 2, 3})); }, {"expert id -2"});
  // -1 marks an unfilled row of a dispatch buffer: it contributes nothing.
  Tensor ids = idTensor({2, 1, 2}, {-1, 1, 2, -1}), zeroed = weights;
  zeroed = zeroed.to(DType::F32);
  zeroed.mutableData<float>()[0] = zeroed.mutableData<float>()[3] = 0;
  expectClose("out, unfilled rows", c.run(weights, ids),
              c.reference(zeroed, idTensor({2, 1, 2}, {0, 1, 2, 0})));
  expectError(
      [&] {
        kernels::groupedExpertsBackward(dout, c.x, weights, idTensor({2, 1, 2}, {0, 9, 2, 3}),
                                        c.w1, c.w3, c.w2);
      },
      {"expert id 9"});
}

/// Experts [offset, offset + count) of a stack [E, ...].
Tensor expertBlock(const Tensor &stack, int64_t offset, int64_t count) {
  Shape shape = stack.shape();
  int64_t per = stack.numel() / shape[0];
  shape[0] = count;
  Tensor out(DType::F32, shape);
  std::copy_n(stack.data<float>() + offset * per, count * per, out.mutableData<float>());
  return out;
}

Vec plus(Vec a, const Vec &b) {
  for (size_t i = 0; i < a.size(); ++i)
    a[i] += b[i];
  return a;
}

TEST(MoeKernelsTest, ExpertShardsSumToTheWholeLayer) {
  // Expert parallelism: two ranks hold experts {0, 1} and {2, 3}. Each runs
  // its block over all the tokens; the outputs, input and routing-weight
  // gradients sum to the whole layer's, and each block's weight gradients
  // are the whole's rows for it.
  std::mt19937 rng(39);
  ExpertCase c(kDims, rng);
  kernels::RouterOutputs r = kernels::router(randomTensor({2, 5, 4}, rng, 2.0f), 2, true);
  Tensor dout = randomTensor(c.x.shape(), rng);
  kernels::GroupedExpertsGrads whole =
      kernels::groupedExpertsBackward(dout, c.x, r.weights, r.experts, c.w1, c.w3, c.w2);
  Vec out(c.x.numel()), dx(c.x.numel()), dw(r.weights.numel());
  for (int64_t offset : {0, 2}) {
    kernels::ExpertShard shard{offset, kDims.experts};
    Tensor w1 = expertBlock(c.w1, offset, 2), w3 = expertBlock(c.w3, offset, 2),
           w2 = expertBlock(c.w2, offset, 2);
    out = plus(out, toDoubles(kernels::groupedExperts(c.x, r.weights, r.experts, w1, w3, w2,
                                                      shard)));
    kernels::GroupedExpertsGrads g =
        kernels::groupedExpertsBackward(dout, c.x, r.weights, r.experts, w1, w3, w2, shard);
    dx = plus(dx, toDoubles(g.x));
    dw = plus(dw, toDoubles(g.weights));
    expectClose("dw1 block", g.w1, toDoubles(expertBlock(whole.w1, offset, 2)));
    expectClose("dw3 block", g.w3, toDoubles(expertBlock(whole.w3, offset, 2)));
    expectClose("dw2 block", g.w2, toDoubles(expertBlock(whole.w2, offset, 2)));
  }
  expectClose("out", c.run(r.weights, r.experts), out);
  expectClose("dx", whole.x, dx);
  expectClose("dweights", whole.weights, dw);
  // A block past the experts, and ids checked against all of them.
  expectError(
      [&] {
        kernels::groupedExperts(c.x, r.weights, r.experts, c.w1, c.w3, c.w2,
                                kernels::ExpertShard{2, 4});
      },
      {"4 experts at 2", "does not fit in 4"});
  expectError(
      [&] {
        kernels::groupedExperts(c.x, r.weights, idTensor({2, 5, 2}, std::vector<int64_t>(20, 7)),
                                expertBlock(c.w1, 0, 2), expertBlock(c.w3, 0, 2),
                                expertBlock(c.w2, 0, 2), kernels::ExpertShard{0, 4});
      },
      {"expert id 7", "[0, 4)"});
}

// --- Load balancing loss ----------------------------------------------------

// Mixed precision: one expert taking every token at weight 1 is a dense
// SwiGLU MLP, and with a rounding type the kernel rounds exactly where
// kiln-mixed-precision's casts round that MLP's linears (outputs, the down
// projection's input) and where their VJPs round the cotangents. Both run
// the same float32 GEMMs, so the results agree to float32 rounding; a missed
// or extra bf16 rounding shows as an error of order 1e-3.
TEST(MoeKernelsTest, RoundedExpertsRoundAsTheDenseMlpsCasts) {
  std::mt19937 rng(51);
  const int64_t tokens = 12, hidden = 16, inter = 24;
  auto bf16 = [](Tensor t) { return kernels::roundTo(std::move(t), DType::BF16); };
  // The operands as the casts leave them: bf16 values.
  Tensor x = bf16(randomTensor({tokens, hidden}, rng));
  Tensor w1 = bf16(randomTensor({1, inter, hidden}, rng, 0.5f));
  Tensor w3 = bf16(randomTensor({1, inter, hidden}, rng, 0.5f));
  Tensor w2 = bf16(randomTensor({1, hidden, inter}, rng, 0.5f));
  Tensor dout = bf16(randomTensor({tokens, hidden}, rng));
  Tensor weights(DType::F32, {tokens, 1});
  std::fill_n(weights.mutableData<float>(), tokens, 1.0f);
  Tensor ids = idTensor({tokens, 1}, std::vector<int64_t>(tokens, 0));
  Tensor d1 = w1.reshaped({inter, hidden}), d3 = w3.reshaped({inter, hidden}),
         d2 = w2.reshaped({hidden, inter});

  // The dense MLP with the casts: gate, up, act and y rounded.
  Tensor gate = bf16(kernels::linear(x, d1)), up = bf16(kernels::linear(x, d3));
  Tensor act = bf16(kernels::swiglu(gate, up));
  Tensor y = bf16(kernels::linear(act, d2));
  // Its backward with the casts' VJPs: dy, d act, d gate, d up rounded.
  Tensor dy = bf16(dout);
  Tensor dact = bf16(kernels::linearBackwardData(dy, d2));
  auto [dgate, dup] = kernels::swigluBackward(dact, gate, up);
  dgate = bf16(dgate);
  dup = bf16(dup);
  Vec dx = plus(toDoubles(kernels::linearBackwardData(dgate, d1)),
                toDoubles(kernels::linearBackwardData(dup, d3)));

  Tensor out = kernels::groupedExperts(x, weights, ids, w1, w3, w2, {}, DType::BF16);
  expectClose("y", out, toDoubles(y));
  kernels::GroupedExpertsGrads g = kernels::groupedExpertsBackward(dout, x, weights, ids, w1,
                                                                   w3, w2, {}, DType::BF16);
  expectClose("dx", g.x, dx);
  expectClose("dw1", g.w1, toDoubles(kernels::linearBackwardWeight(dgate, x)));
  expectClose("dw3", g.w3, toDoubles(kernels::linearBackwardWeight(dup, x)));
  expectClose("dw2", g.w2, toDoubles(kernels::linearBackwardWeight(dy, act)));
  Vec dw(tokens), dyv = toDoubles(dout), yv = toDoubles(y);
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t h = 0; h < hidden; ++h)
      dw[t] += dyv[t * hidden + h] * yv[t * hidden + h];
  expectClose("dweights", g.weights, dw);

  // The rounding is what the comparison sees: without it the output and the
  // weight gradients move by far more than the tolerance.
  auto worstGap = [](const Tensor &a, const Tensor &b) {
    Vec u = toDoubles(a), v = toDoubles(b);
    double worst = 0;
    for (size_t i = 0; i < u.size(); ++i)
      worst = std::max(worst, std::abs(u[i] - v[i]) / std::max(1.0, std::abs(v[i])));
    return worst;
  };
  kernels::GroupedExpertsGrads wide =
      kernels::groupedExpertsBackward(dout, x, weights, ids, w1, w3, w2);
  EXPECT_GT(worstGap(kernels::groupedExperts(x, weights, ids, w1, w3, w2), out), 100 * kTol);
  EXPECT_GT(worstGap(wide.w1, g.w1), 100 * kTol);
  EXPECT_GT(worstGap(wide.w2, g.w2), 100 * kTol);
}

TEST(MoeKernelsTest, LoadBalancingLossMatchesHfFormula) {
  // Two layers of different token counts, concatenated as HF does.
  std::mt19937 rng(38);
  kernels::RouterOutputs a = kernels::router(randomTensor({2, 5, 4}, rng, 2.0f), 2, true);
  kernels::RouterOutputs b = kernels::router(randomTensor({3, 4}, rng, 2.0f), 2, true);
  Vec probs = toDoubles(a.probs), probsB = toDoubles(b.probs);
  probs.insert(probs.end(), probsB.begin(), probsB.end());
  std::vector<int64_t> ids = idsOf(a.experts), idsB = idsOf(b.experts);
  ids.insert(ids.end(), idsB.begin(), idsB.end());
  Tensor loss = kernels::loadBalancingLoss({a.probs, b.probs}, {a.experts, b.experts});
  EXPECT_EQ(loss.rank(), 0u);
  expectClose("loss", loss, {loadBalancingReference(probs, ids, 4, 2)});
}

TEST(MoeKernelsTest, LoadBalancingLossBackwardMatchesFiniteDifferences) {
  std::mt19937 rng(39);
  kernels::RouterOutputs a = kernels::router(randomTensor({2, 5, 4}, rng, 2.0f), 2, true);
  kernels::RouterOutputs b = kernels::router(randomTensor({3, 4}, rng, 2.0f), 2, true);
  std::vector<int64_t> ids = idsOf(a.experts), idsB = idsOf(b.experts);
  ids.insert(ids.end(), idsB.begin(), idsB.end());
  const double dloss = 1.7;
  std::vector<Tensor> grads =
      kernels::loadBalancingLossBackward(scalar(float(dloss)), {a.experts, b.experts}, 4);
  ASSERT_EQ(grads.size(), 2u);
  EXPECT_EQ(grads[1].shape(), b.probs.shape());
  // Both layers' probabilities as one vector; the counts are held fixed.
  Vec probs = toDoubles(a.probs), probsB = toDoubles(b.probs);
  probs.insert(probs.end(), probsB.begin(), probsB.end());
  Vec fd = numericGradient(
      [&](const Vec &p) { return dloss * loadBalancingReference(p, ids, 4, 2); }, probs);
  expectClose("dprobs[0]", grads[0], Vec(fd.begin(), fd.begin() + 40));
  expectClose("dprobs[1]", grads[1], Vec(fd.begin() + 40, fd.end()));
}

// --- Token dispatcher (all-to-all expert parallelism) -------------------------

/// The buffer's experts, then the combine: the dispatched layer.
Tensor dispatchedExperts(const ExpertCase &c, const Tensor &weights, const Tensor &ids,
                         kernels::DispatchLayout layout) {
  kernels::DispatchOutputs d = kernels::expertDispatch(c.x, weights, ids, layout, c.d.experts);
  Tensor out = kernels::groupedExperts(d.rows, d.rowWeights, d.rowExperts, c.w1, c.w3, c.w2);
  return kernels::expertCombine(d.slots, out, layout.chunks);
}

TEST(MoeKernelsTest, DroplessDispatchMatchesTheExpertsReference) {
  std::mt19937 rng(41);
  ExpertCase c(kDims, rng);
  kernels::RouterOutputs r = kernels::router(randomTensor({2, 5, 4}, rng, 2.0f), 2, true);
  // 5 tokens per chunk, at most min(k, 2 experts per block) = 2 pairs each.
  for (int64_t groups : {1, 2, 4}) {
    SCOPED_TRACE("groups " + std::to_string(groups));
    kernels::DispatchLayout layout{groups, 2, 5 * std::min<int64_t>(2, 4 / groups)};
    expectClose("out", dispatchedExperts(c, r.weights, r.experts, layout),
                c.reference(r.weights, r.experts));
  }
}

TEST(MoeKernelsTest, DispatchDropsPairsBeyondCapacityLaterChoicesFirst) {
  std::mt19937 rng(42);
  ExpertCase c(kDims, rng);
  Tensor weights = randomTensor({2, 5, 2}, rng);
  // Chunk 0 sends 7 pairs to block 0 (experts 0, 1) and chunk 1 eight to
  // block 1: a capacity of 4 keeps their first choices and drops 3 + 4
  // second ones.
  std::vector<int64_t> ids = {0, 1, 0, 2, 1, 0, 0, 3, 2, 0, //
                              3, 2, 2, 3, 3, 2, 2, 3, 1, 0};
  Tensor idT = idTensor({2, 5, 2}, ids);
  kernels::DispatchLayout layout{2, 2, 4};
  kernels::DispatchOutputs d = kernels::expertDispatch(c.x, weights, idT, layout, 4);
  // Independently: count each chunk's pairs per block, slot-major.
  std::vector<int64_t> keptIds(ids.size()), dropped;
  Vec kept = toDoubles(weights);
  for (int64_t s = 0; s < 2; ++s) {
    int64_t filled[2] = {0, 0};
    for (int64_t j = 0; j < 2; ++j)
      for (int64_t t = s * 5; t < s * 5 + 5; ++t) {
        int64_t p = t * 2 + j, g = ids[p] / 2;
        keptIds[p] = ids[p];
        if (filled[g]++ >= layout.capacity) {
          kept[p] = 0; // dropped: as if routed with no weight
          dropped.push_back(p);
        }
      }
  }
  std::sort(dropped.begin(), dropped.end());
  EXPECT_EQ(dropped, (std::vector<int64_t>{1, 5, 9, 11, 13, 15, 17}));
  std::vector<int64_t> slots = idsOf(d.slots), droppedSlots;
  for (size_t p = 0; p < slots.size(); ++p)
    if (slots[p] < 0)
      droppedSlots.push_back(int64_t(p));
  EXPECT_EQ(droppedSlots, dropped);
  Tensor keptWeights(DType::F32, {2, 5, 2});
  for (size_t i = 0; i < kept.size(); ++i)
    keptWeights.mutableData<float>()[i] = float(kept[i]);
  expectClose("out", dispatchedExperts(c, weights, idT, layout),
              c.reference(keptWeights, idTensor({2, 5, 2}, keptIds)));
}

// The backward ops are the adjoints of the (linear) placement and sum:
// <f(a), b> = <a, f^T(b)> for random a and b, slots held fixed.
TEST(MoeKernelsTest, DispatchBackwardOpsAreAdjoints) {
  std::mt19937 rng(43);
  ExpertCase c(kDims, rng);
  kernels::RouterOutputs r = kernels::router(randomTensor({2, 5, 4}, rng, 2.0f), 2, true);
  kernels::DispatchLayout layout{2, 2, 3}; // some pairs dropped
  kernels::DispatchOutputs d = kernels::expertDispatch(c.x, r.weights, r.experts, layout, 4);
  std::vector<int64_t> slots = idsOf(d.slots);
  ASSERT_GT(std::count(slots.begin(), slots.end(), -1), 0);

  Tensor rows = randomTensor(d.rows.shape(), rng), dy = randomTensor(c.x.shape(), rng);
  double lhs = dot(toDoubles(kernels::expertCombine(d.slots, rows, 2)), toDoubles(dy));
  double rhs = dot(toDoubles(rows), toDoubles(kernels::expertCombineBackward(dy, d.slots, layout)));
  EXPECT_NEAR(lhs, rhs, 1e-4 * std::max(1.0, std::abs(lhs)));

  Tensor dRows = randomTensor(d.rows.shape(), rng), dRowW = randomTensor(d.rowWeights.shape(), rng);
  auto [dx, dw] = kernels::expertDispatchBackward(d.slots, dRows, dRowW, 2);
  double forward = dot(toDoubles(d.rows), toDoubles(dRows)) +
                   dot(toDoubles(d.rowWeights), toDoubles(dRowW));
  double backward = dot(toDoubles(c.x), toDoubles(dx)) + dot(toDoubles(r.weights), toDoubles(dw));
  EXPECT_NEAR(forward, backward, 1e-4 * std::max(1.0, std::abs(forward)));
}

TEST(MoeKernelsTest, DispatchRejectsChunksThatDoNotSplitTheBatch) {
  std::mt19937 rng(44);
  ExpertCase c(kDims, rng);
  kernels::RouterOutputs r = kernels::router(randomTensor({2, 5, 4}, rng, 2.0f), 2, true);
  expectError([&] { kernels::expertDispatch(c.x, r.weights, r.experts, {2, 3, 4}, 4); },
              {"3 chunks", "[2, 5, 2]"});
  expectError([&] { kernels::expertDispatch(c.x, r.weights, r.experts, {3, 2, 4}, 4); },
              {"3 groups", "4 experts"});
}

} // namespace
