//===- KilnBench.cpp - Google Benchmark suite for Kiln's hot paths --------===//
//
// `make bench` runs it. Each optimisation keeps its baseline next to it so a
// single run gives the ratio on this machine:
//   CrossEntropyBackward     vs CrossEntropyBackwardBaseline (two double exps
//                            per element, the first implementation)
//   AdamW (OpenMP threads)   vs AdamW/threads:1
// plus the capture, training-step and tokenizer figures quoted in the docs.
//
//===----------------------------------------------------------------------===//

#include "kiln/Data/Tokenizer.h"
#include "kiln/Driver/Training.h"
#include "kiln/Frontend/Capture.h"
#include "kiln/Runtime/BackwardKernels.h"
#include "kiln/Runtime/Kernels.h"
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

void CaptureQwen3_32B_Seq4096(benchmark::State &state) {
  const Qwen3Config &config = Qwen3Config::flavors().back();
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
