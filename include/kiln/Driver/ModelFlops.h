//===- ModelFlops.h - Model FLOPs per token, by published definitions -*- C++ -*-===//
//
// MFU is model FLOPs per token x tokens/s over a peak, and frameworks count
// the model FLOPs differently; a planned MFU compares with a published one
// only under the same count. Kiln reports torchtitan's (its own definition)
// and, for dense models, NxDT's. See docs/planner.md.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_DRIVER_MODELFLOPS_H
#define KILN_DRIVER_MODELFLOPS_H

#include "kiln/Frontend/Qwen3Config.h"

#include <cstdint>

namespace kiln {

/// torchtitan's (get_nparams_and_flops, Kiln's MFU): 6 * matmul parameters
/// a token uses (a MoE layer's k routed experts, not all; the input
/// embedding only when tied to the output) + 12 * layers * heads * head_dim
/// * seq_len.
double torchtitanFlopsPerToken(const Qwen3Config &model, int64_t seqLen);

/// torchtitan's count as its Qwen3 models had it until pytorch/torchtitan PR
/// 1923 (merged 2025-10-29), which published MFU figures of that time use:
/// the attention term's head_dim taken as hidden / heads (80 for Qwen3-32B,
/// whose heads are 128 wide). Equal to the current count where the two agree
/// (every Llama shape, Qwen3-8B).
double torchtitanBefore1923FlopsPerToken(const Qwen3Config &model, int64_t seqLen);

/// NxDT's (neuronx-distributed-training's llama_perf_estimate.py, for Llama
/// configs): per sequence 3 x the forward, the forward being per layer the
/// Q/K/V/O projections (head size hidden / heads), QK^T and softmax x V at
/// 2 T^2 hidden each, the softmax at 6 heads T^2, the MLP's three
/// projections, plus the input embedding and the output logits as matmuls
/// (2 V hidden T each); no causal halving. Divided by seq_len. 0 for a MoE
/// model, which it does not cover.
double nxdtFlopsPerToken(const Qwen3Config &model, int64_t seqLen);

} // namespace kiln

#endif // KILN_DRIVER_MODELFLOPS_H
