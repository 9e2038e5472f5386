//===- KilnBench.cpp - Google Benchmark suite for Kiln's hot paths --------===//
//
// `make bench` runs it. Each optimisation keeps its baseline next to it so a
// single run gives the ratio on this machine:
//   CrossEntropyBackward     vs CrossEntropyBackwardBaseline (two double exps
//                            per element, the first implementation)
//   AdamW (OpenMP threads)   vs AdamW/threads:1
//   GroupedExpertsFwdBwd     vs GroupedExpertsFwdBwdNaiveBaseline (one
//                            matrix-vector product per token and slot, no
//                            grouping by expert and no GEMMs)
//   FlashAttentionFwdBwd     vs AttentionFwdBwdBaseline (kernels::attention
//   (+Permuted: with the 8      and attentionBackward, [s, s] scores per
//   layout transposes)          head), causal, 16 heads / 8 kv heads, d 128
//   ChunkedCrossEntropy      vs UnfusedCrossEntropyBaseline (linear,
//                            crossEntropy, crossEntropyBackward and both
//                            linear backwards through [tokens, V] logits)
// plus the capture, training-step and tokenizer figures quoted in the docs.
//
//===----------------------------------------------------------------------===//

#include "kiln/Data/Tokenizer.h"
#include "kiln/Driver/Training.h"
#include "kiln/Frontend/Capture.h"
#include "kiln/Runtime/BackwardKernels.h"
#include "kiln/Runtime/ChunkedCrossEntropy.h"
#include "kiln/Runtime/FlashAttention.h"
#include "kiln/Runtime/ForwardKernels.h"
#include "kiln/Runtime/MoeKernels.h"
#include "kiln/Runtime/TokenBatch.h"
#include "kiln/Support/Paths.h"

#include <benchmark/benchmark.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

using namespace kiln;

namespace {

Tensor randomTensor(Shape shape, uint32_t seed) {
  Tensor t(DType::F32, std::move(shape));
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int64_t i = 0; i < t.numel(); ++i)
    t.mutableData<float>()[i] = normal(rng);
  return t;
}

Tensor labelsFor(int64_t rows, int64_t vocab) {
  Tensor t(DType::I64, {rows});
  for (int64_t r = 0; r < rows; ++r)
    t.mutableData<int64_t>()[r] = (r * 7919) % vocab;
  return t;
}

constexpr int64_t kVocab = 151936, kRows = 64;

/// [b, s, h, d] <-> [b, h, s, d]: the kiln.transpose the IR puts around NKI
/// layout kernels.
Tensor swapMiddle(const Tensor &t) { return kernels::transpose(t, {0, 2, 1, 3}); }

void CrossEntropyBackward(benchmark::State &state) {
  Tensor logits = randomTensor({kRows, kVocab}, 1), labels = labelsFor(kRows, kVocab);
  Tensor dloss(DType::F32, {});
  *dloss.mutableData<float>() = 1.0f;
  kernels::crossEntropyBackward(logits, labels, dloss); // warm the buffer cache
  for (auto _ : state)
    benchmark::DoNotOptimize(kernels::crossEntropyBackward(logits, labels, dloss));
  state.SetItemsProcessed(state.iterations() * kRows * kVocab);
}
BENCHMARK(CrossEntropyBackward)->Unit(benchmark::kMillisecond);

/// The first implementation: max, then exp in double twice per element.
void CrossEntropyBackwardBaseline(benchmark::State &state) {
  Tensor logits = randomTensor({kRows, kVocab}, 1), labels = labelsFor(kRows, kVocab);
  for (auto _ : state) {
    Tensor out(DType::F32, logits.shape());
    for (int64_t r = 0; r < kRows; ++r) {
      const float *row = logits.data<float>() + r * kVocab;
      float *o = out.mutableData<float>() + r * kVocab;
      double mx = *std::max_element(row, row + kVocab), sum = 0;
      for (int64_t j = 0; j < kVocab; ++j)
        sum += std::exp(row[j] - mx);
      int64_t label = labels.data<int64_t>()[r];
      for (int64_t j = 0; j < kVocab; ++j)
        o[j] = float((std::exp(row[j] - mx) / sum - (j == label)) / kRows);
    }
    benchmark::DoNotOptimize(out);
  }
  state.SetItemsProcessed(state.iterations() * kRows * kVocab);
}
BENCHMARK(CrossEntropyBackwardBaseline)->Unit(benchmark::kMillisecond);

void AdamW(benchmark::State &state) {
  int64_t n = 20'000'000;
  Tensor p = randomTensor({n}, 2), g = randomTensor({n}, 3), m(DType::F32, {n}),
         v(DType::F32, {n});
  kernels::AdamWHyper hyper{1e-3, 0.9, 0.95, 1e-8, 0.1, 1, 1.0};
  int previous = omp_get_max_threads();
  if (state.range(0) > 0)
    omp_set_num_threads(int(state.range(0)));
  kernels::adamw(p, g, m, v, hyper); // first touch of the output buffers
  for (auto _ : state)
    benchmark::DoNotOptimize(kernels::adamw(p, g, m, v, hyper));
  omp_set_num_threads(previous);
  state.SetItemsProcessed(state.iterations() * n);
}
BENCHMARK(AdamW)->ArgName("threads")->Arg(1)->Arg(0)->Unit(benchmark::kMillisecond);

/// A Qwen3-MoE-like expert layer (moe_intermediate 256) with random routing.
struct MoeBenchInputs {
  static constexpr int64_t kTokens = 1024, kHidden = 512, kInter = 256, kExperts = 16,
                           kTopK = 4;
  Tensor x = randomTensor({kTokens, kHidden}, 4), dout = randomTensor({kTokens, kHidden}, 5);
  Tensor w1 = randomTensor({kExperts, kInter, kHidden}, 6),
         w3 = randomTensor({kExperts, kInter, kHidden}, 7),
         w2 = randomTensor({kExperts, kHidden, kInter}, 8);
  kernels::RouterOutputs routing =
      kernels::router(randomTensor({kTokens, kExperts}, 9), kTopK, true);
};

void GroupedExpertsFwdBwd(benchmark::State &state) {
  MoeBenchInputs in;
  const kernels::RouterOutputs &r = in.routing;
  for (auto _ : state) {
    benchmark::DoNotOptimize(
        kernels::groupedExperts(in.x, r.weights, r.experts, in.w1, in.w3, in.w2));
    benchmark::DoNotOptimize(kernels::groupedExpertsBackward(in.dout, in.x, r.weights,
                                                             r.experts, in.w1, in.w3, in.w2));
  }
  state.SetItemsProcessed(state.iterations() * MoeBenchInputs::kTokens);
}
BENCHMARK(GroupedExpertsFwdBwd)->Unit(benchmark::kMillisecond);

/// The same forward and backward token by token: per (token, slot), the
/// matrix-vector products against that slot's expert.
void GroupedExpertsFwdBwdNaiveBaseline(benchmark::State &state) {
  using In = MoeBenchInputs;
  const int64_t H = In::kHidden, I = In::kInter, K = In::kTopK;
  In in;
  const float *x = in.x.data<float>(), *dout = in.dout.data<float>(),
              *wts = in.routing.weights.data<float>();
  const int64_t *ids = in.routing.experts.data<int64_t>();
  std::vector<float> g(I), u(I), a(I), dg(I), du(I), y(H);
  for (auto _ : state) {
    Tensor out(DType::F32, in.x.shape()), dx(DType::F32, in.x.shape()),
        dw(DType::F32, in.routing.weights.shape()), dw1(DType::F32, in.w1.shape()),
        dw3(DType::F32, in.w3.shape()), dw2(DType::F32, in.w2.shape());
    for (int64_t t = 0; t < In::kTokens; ++t)
      for (int64_t j = 0; j < K; ++j) {
        const int64_t e = ids[t * K + j];
        const float wt = wts[t * K + j], *xt = x + t * H, *dy = dout + t * H;
        const float *W1 = in.w1.data<float>() + e * I * H,
                    *W3 = in.w3.data<float>() + e * I * H,
                    *W2 = in.w2.data<float>() + e * H * I;
        float *dW1 = dw1.mutableData<float>() + e * I * H,
              *dW3 = dw3.mutableData<float>() + e * I * H,
              *dW2 = dw2.mutableData<float>() + e * H * I;
        for (int64_t i = 0; i < I; ++i) {
          float gi = 0, ui = 0;
          for (int64_t h = 0; h < H; ++h)
            gi += W1[i * H + h] * xt[h], ui += W3[i * H + h] * xt[h];
          g[i] = gi, u[i] = ui, a[i] = gi / (1.0f + std::exp(-gi)) * ui;
        }
        float dwt = 0;
        for (int64_t h = 0; h < H; ++h) {
          float yh = 0;
          for (int64_t i = 0; i < I; ++i)
            yh += W2[h * I + i] * a[i];
          out.mutableData<float>()[t * H + h] += wt * yh;
          dwt += dy[h] * yh;
        }
        dw.mutableData<float>()[t * K + j] = dwt;
        // dA = W2^T (wt dy), dW2 += (wt dy) a^T, then through silu(g) * u.
        std::fill(dg.begin(), dg.end(), 0.0f);
        for (int64_t h = 0; h < H; ++h) {
          float d = wt * dy[h];
          for (int64_t i = 0; i < I; ++i) {
            dg[i] += W2[h * I + i] * d;
            dW2[h * I + i] += d * a[i];
          }
        }
        for (int64_t i = 0; i < I; ++i) {
          float sig = 1.0f / (1.0f + std::exp(-g[i]));
          du[i] = dg[i] * g[i] * sig;
          dg[i] *= u[i] * sig * (1.0f + g[i] * (1.0f - sig));
        }
        float *dxt = dx.mutableData<float>() + t * H;
        for (int64_t i = 0; i < I; ++i)
          for (int64_t h = 0; h < H; ++h) {
            dW1[i * H + h] += dg[i] * xt[h];
            dW3[i * H + h] += du[i] * xt[h];
            dxt[h] += dg[i] * W1[i * H + h] + du[i] * W3[i * H + h];
          }
      }
    benchmark::DoNotOptimize(out);
    benchmark::DoNotOptimize(dx);
  }
  state.SetItemsProcessed(state.iterations() * In::kTokens);
}
BENCHMARK(GroupedExpertsFwdBwdNaiveBaseline)->Unit(benchmark::kMillisecond);

/// Causal GQA attention as in Qwen3 (16 query heads, 8 kv heads, d 128);
/// arguments batch and seq.
struct AttentionBenchInputs {
  static constexpr int64_t kHeads = 16, kKvHeads = 8, kHeadDim = 128;
  explicit AttentionBenchInputs(const benchmark::State &state)
      : batch(state.range(0)), seq(state.range(1)),
        q(randomTensor({batch, kHeads, seq, kHeadDim}, 10)),
        k(randomTensor({batch, kKvHeads, seq, kHeadDim}, 11)),
        v(randomTensor({batch, kKvHeads, seq, kHeadDim}, 12)),
        dout(randomTensor({batch, kHeads, seq, kHeadDim}, 13)) {}
  int64_t batch, seq;
  Tensor q, k, v, dout; ///< [b, h, s, d]; the baseline permutes them once
  float scale = 1.0f / std::sqrt(float(kHeadDim));
};

void attentionArgs(benchmark::internal::Benchmark *b) {
  b->ArgNames({"b", "s"})->Unit(benchmark::kMillisecond);
  for (int64_t batch : {1, 4})
    for (int64_t seq : {256, 1024, 2048})
      b->Args({batch, seq});
}

void flashFwdBwd(benchmark::State &state, kernels::FlashBlocks blocks) {
  AttentionBenchInputs in(state);
  for (auto _ : state) {
    auto [out, lse] = kernels::flashAttention(in.q, in.k, in.v, true, in.scale, blocks);
    benchmark::DoNotOptimize(kernels::flashAttentionBackward(in.dout, in.q, in.k, in.v, out,
                                                             lse, true, in.scale, blocks));
  }
  state.SetItemsProcessed(state.iterations() * in.batch * in.seq);
}

/// Flash kernels alone, inputs already [b, h, s, d].
void FlashAttentionFwdBwd(benchmark::State &state) { flashFwdBwd(state, {}); }
BENCHMARK(FlashAttentionFwdBwd)->Apply(attentionArgs);

/// Tile-size sweep at one shape (how the defaults were picked).
void FlashAttentionFwdBwdTiles(benchmark::State &state) {
  flashFwdBwd(state, {state.range(2), state.range(3)});
}
BENCHMARK(FlashAttentionFwdBwdTiles)
    ->ArgNames({"b", "s", "bq", "bk"})
    ->ArgsProduct({{1}, {1024}, {32, 64, 128}, {64, 128, 256}})
    ->Unit(benchmark::kMillisecond);

/// Flash kernels plus the permutes the IR inserts around them in a graph
/// whose attention tensors are [b, s, h, d]: q, k, v in and out back in the
/// forward; dout in and dq, dk, dv back in the backward (8 transposes).
void FlashAttentionFwdBwdPermuted(benchmark::State &state) {
  AttentionBenchInputs in(state);
  Tensor q = swapMiddle(in.q), k = swapMiddle(in.k), v = swapMiddle(in.v),
         dout = swapMiddle(in.dout);
  for (auto _ : state) {
    Tensor qh = swapMiddle(q), kh = swapMiddle(k), vh = swapMiddle(v);
    auto [out, lse] = kernels::flashAttention(qh, kh, vh, true, in.scale);
    benchmark::DoNotOptimize(swapMiddle(out));
    auto [dq, dk, dv] = kernels::flashAttentionBackward(swapMiddle(dout), qh, kh, vh, out, lse,
                                                        true, in.scale);
    benchmark::DoNotOptimize(swapMiddle(dq));
    benchmark::DoNotOptimize(swapMiddle(dk));
    benchmark::DoNotOptimize(swapMiddle(dv));
  }
  state.SetItemsProcessed(state.iterations() * in.batch * in.seq);
}
BENCHMARK(FlashAttentionFwdBwdPermuted)->Apply(attentionArgs);

void AttentionFwdBwdBaseline(benchmark::State &state) {
  AttentionBenchInputs in(state);
  Tensor q = swapMiddle(in.q), k = swapMiddle(in.k), v = swapMiddle(in.v),
         dout = swapMiddle(in.dout);
  for (auto _ : state) {
    auto [out, lse] = kernels::attention(q, k, v, true, in.scale);
    benchmark::DoNotOptimize(
        kernels::attentionBackward(dout, q, k, v, out, lse, true, in.scale));
  }
  state.SetItemsProcessed(state.iterations() * in.batch * in.seq);
}
BENCHMARK(AttentionFwdBwdBaseline)->Apply(attentionArgs);

/// Output projection + mean cross-entropy, forward and backward: arguments
/// tokens, hidden and (chunked only) chunkRows, 0 for the default. The
/// `extra_MB` counter is the memory each needs besides inputs and gradients:
/// logits + dlogits for the baseline, one chunk + row losses for the kernel.
constexpr int64_t kCeVocab = 151936;

/// N(0, 1/H) entries, so logits of N(0, 1) hidden states are N(0, 1) as after
/// initialisation (unit-variance weights give logits of deviation sqrt(H),
/// whose softmax underflows into subnormals that stall the baseline's GEMMs).
Tensor projectionWeight(int64_t hidden) {
  Tensor w = randomTensor({kCeVocab, hidden}, 15);
  const float scale = 1.0f / std::sqrt(float(hidden));
  for (int64_t i = 0; i < w.numel(); ++i)
    w.mutableData<float>()[i] *= scale;
  return w;
}

void ChunkedCrossEntropy(benchmark::State &state) {
  const int64_t tokens = state.range(0), hidden = state.range(1), chunk = state.range(2);
  Tensor h = randomTensor({tokens, hidden}, 14), w = projectionWeight(hidden);
  Tensor labels = labelsFor(tokens, kCeVocab), dloss(DType::F32, {});
  *dloss.mutableData<float>() = 1.0f;
  for (auto _ : state) {
    auto r = kernels::chunkedCrossEntropy(h, w, labels, {}, chunk);
    benchmark::DoNotOptimize(
        kernels::chunkedCrossEntropyBackward(dloss, std::move(r.gradH), std::move(r.gradW)));
  }
  state.counters["extra_MB"] =
      double(kernels::chunkedCrossEntropyScratchBytes(tokens, kCeVocab, chunk)) / 1e6;
  state.SetItemsProcessed(state.iterations() * tokens);
}
BENCHMARK(ChunkedCrossEntropy)
    ->ArgNames({"tokens", "H", "chunk"})
    ->Args({1024, 256, 0})
    ->Args({1024, 256, 256})
    ->Args({2048, 128, 0})
    ->Args({1024, 128, 0})
    ->Args({1024, 128, 64})
    ->Args({1024, 128, 128})
    ->Args({1024, 128, 256})
    ->Unit(benchmark::kMillisecond);

void UnfusedCrossEntropyBaseline(benchmark::State &state) {
  const int64_t tokens = state.range(0), hidden = state.range(1);
  Tensor h = randomTensor({tokens, hidden}, 14), w = projectionWeight(hidden);
  Tensor labels = labelsFor(tokens, kCeVocab), dloss(DType::F32, {});
  *dloss.mutableData<float>() = 1.0f;
  for (auto _ : state) {
    Tensor logits = kernels::linear(h, w);
    benchmark::DoNotOptimize(kernels::crossEntropy(logits, labels));
    Tensor dlogits = kernels::crossEntropyBackward(logits, labels, dloss);
    benchmark::DoNotOptimize(kernels::linearBackwardData(dlogits, w));
    benchmark::DoNotOptimize(kernels::linearBackwardWeight(dlogits, h));
  }
  state.counters["extra_MB"] = 2.0 * double(tokens * kCeVocab * 4) / 1e6;
  state.SetItemsProcessed(state.iterations() * tokens);
}
BENCHMARK(UnfusedCrossEntropyBaseline)
    ->ArgNames({"tokens", "H"})
    ->Args({1024, 256})
    ->Args({2048, 128})
    ->Unit(benchmark::kMillisecond);

void CaptureQwen3_32B_Seq4096(benchmark::State &state) {
  const Qwen3Config &config = Qwen3Config::flavor("qwen3-32b");
  for (auto _ : state) {
    mlir::MLIRContext context;
    benchmark::DoNotOptimize(captureQwen3(context, config, {1, 4096}));
  }
}
BENCHMARK(CaptureQwen3_32B_Seq4096)->Unit(benchmark::kMillisecond);

/// One AdamW training step of the 3-layer fixture (batch 2 x seq 32).
void TrainStepFixture(benchmark::State &state) {
  std::string fixture = std::string(KILN_SOURCE_DIR) + "/test/data/qwen3-dense-tiny";
  Trainer trainer(TrainConfig::load(
      "", {"--model.hf_path=" + fixture, "--checkpoint.initial_load_path=" + fixture,
           "--checkpoint.initial_load_in_hf=true", "--training.local_batch_size=2",
           "--training.seq_len=32"}));
  Tensor tokens = readTokenBatch(fixture + "/tokens.json");
  for (auto _ : state)
    benchmark::DoNotOptimize(trainer.step(tokens));
  state.SetItemsProcessed(state.iterations() * 64);
}
BENCHMARK(TrainStepFixture)->Unit(benchmark::kMillisecond);

/// Encoding 1 MB of English (the Brown corpus's text, as-is) with Qwen3's
/// tokenizer; a fresh tokenizer per iteration measures the cold merge cache.
void TokenizeOneMegabyte(benchmark::State &state) {
  std::string cache = assetCacheDir();
  if (!std::filesystem::exists(cache + "/qwen3/tokenizer.json")) {
    state.SkipWithError("no tokenizer: run scripts/fetch-assets.sh");
    return;
  }
  std::string text;
  for (const auto &entry : std::filesystem::directory_iterator(cache + "/brown")) {
    std::ifstream in(entry.path());
    std::stringstream s;
    s << in.rdbuf();
    text += s.str();
    if (text.size() >= (1 << 20))
      break;
  }
  text.resize(std::min<size_t>(text.size(), 1 << 20));
  for (auto _ : state) {
    state.PauseTiming();
    auto tokenizer = Tokenizer::load(cache + "/qwen3/tokenizer.json");
    state.ResumeTiming();
    benchmark::DoNotOptimize(tokenizer->encode(text));
  }
  state.SetBytesProcessed(state.iterations() * int64_t(text.size()));
}
BENCHMARK(TokenizeOneMegabyte)->Unit(benchmark::kMillisecond);

} // namespace

BENCHMARK_MAIN();
