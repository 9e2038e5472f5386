//===- MoeKernels.h - Host kernels for the mixture-of-experts layer -*- C++ -*-===//
//
// The Qwen3-MoE layer as Hugging Face Transformers computes it
// (Qwen3MoeSparseMoeBlock and load_balancing_loss_func), split in three ops:
//   router:          softmax over every expert in float32, top-k, optional
//                    renormalisation of the k selected probabilities;
//   grouped experts: tokens grouped by expert, one SwiGLU MLP per expert over
//                    its token block (GEMMs), outputs weighted by the routing
//                    weights and summed per token in ascending expert order
//                    (HF's index_add_ order);
//   load balancing:  num_experts * sum_e f_e * P_e over the tokens of every
//                    sparse layer together.
// Same conventions as Kernels.h: float tensors F32, ids I64 (I32 accepted),
// shapes verified by the IR, data errors (an expert id out of range) throw
// kiln::Error.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_RUNTIME_MOEKERNELS_H
#define KILN_RUNTIME_MOEKERNELS_H

#include "kiln/Runtime/Tensor.h"

#include <cstdint>
#include <vector>

namespace kiln::kernels {

struct RouterOutputs {
  Tensor weights; ///< [..., k] F32: selected probabilities (renormalised if asked)
  Tensor experts; ///< [..., k] I64: selected expert ids, by descending probability
  Tensor probs;   ///< [..., E] F32: softmax over all experts
};

/// logits [..., E] -> softmax in float32, top-k by descending probability;
/// equal probabilities go to the lower expert id; NaN ranks above every
/// number (as torch.topk). With `normalize`, weights = top-k / their sum.
/// With `bias` [E] (torchtitan's aux-loss-free balancing), experts are
/// selected by probs + bias while the weights stay the probabilities.
RouterOutputs router(const Tensor &logits, int64_t topK, bool normalize,
                     const Tensor *bias = nullptr);

/// torchtitan's expert-bias update after a step (float32): with tokens_e
/// the selections of expert e in `experts`, delta = coeff * sign(mean(tokens)
/// - tokens), centred to mean 0, added to `bias` [E].
Tensor expertBiasUpdate(const Tensor &bias, const std::vector<Tensor> &experts, double coeff);

/// VJP of router: d logits [..., E] from the forward's probs and experts and
/// the cotangents of weights ([..., k]) and of probs ([..., E], may be null
/// when nothing used the probabilities). The top-k choice itself is not
/// differentiated (as in torch).
Tensor routerBackward(const Tensor &probs, const Tensor &experts, const Tensor &dWeights,
                      const Tensor *dProbs, bool normalize);

/// The experts a rank's stacks hold under expert parallelism: ids
/// [offset, offset + the stacks' count) of `total`; the default holds all.
struct ExpertShard {
  int64_t offset = 0;
  int64_t total = 0; ///< 0: the stacks are every expert
};

/// x [..., H]; weights, experts [..., k]; w1 (gate_proj), w3 (up_proj)
/// [E, I, H]; w2 (down_proj) [E, H, I] -> out [..., H] with
/// out[t] = sum over slots j (ascending expert id) of
///          weights[t, j] * w2_e (silu(w1_e x_t) * (w3_e x_t)),  e = experts[t, j].
/// No capacity limit: every token reaches all of its k experts. With a
/// shard, pairs routed to experts outside it contribute nothing. A narrow
/// `round` (BF16 or F16, mixed precision) rounds each expert's gate and up
/// projections, the SwiGLU product and the expert's output, as the casts of
/// a dense MLP's linears round them; F32 rounds nothing.
Tensor groupedExperts(const Tensor &x, const Tensor &weights, const Tensor &experts,
                      const Tensor &w1, const Tensor &w3, const Tensor &w2,
                      ExpertShard shard = {}, DType round = DType::F32);

struct GroupedExpertsGrads {
  Tensor x, weights, w1, w3, w2;
};

/// VJP of groupedExperts for the cotangent dout [..., H]. Recomputes each
/// expert's gate and up projections from x (nothing but the op's operands
/// is kept from the forward). A narrow `round` rounds the recomputed values
/// as the forward does and the cotangents of each rounded value (each
/// expert's weighted output gradient, the SwiGLU product's, the gate's and
/// the up projection's), as the VJPs of the casts round them.
GroupedExpertsGrads groupedExpertsBackward(const Tensor &dout, const Tensor &x,
                                           const Tensor &weights, const Tensor &experts,
                                           const Tensor &w1, const Tensor &w3,
                                           const Tensor &w2, ExpertShard shard = {},
                                           DType round = DType::F32);

/// HF's load_balancing_loss_func (no attention mask) over the sparse layers
/// together: with N = total tokens over all layers, E experts, k slots,
///   loss = E * sum_e (count_e / N) * (sum of probs[:, e] / N),
/// count_e = how many (token, slot) pairs of all layers selected e.
/// probs[l] [..., E], experts[l] [..., k] -> F32 scalar.
Tensor loadBalancingLoss(const std::vector<Tensor> &probs, const std::vector<Tensor> &experts);

/// VJP of loadBalancingLoss: one d probs[l] ([..., numExperts], the leading
/// shape of experts[l]) per layer, d probs[l][t, e] = dloss * E * count_e /
/// N^2. The probabilities enter linearly, so only the selected ids are
/// read; counts are not differentiated.
std::vector<Tensor> loadBalancingLossBackward(const Tensor &dloss,
                                              const std::vector<Tensor> &experts,
                                              int64_t numExperts);

} // namespace kiln::kernels

#endif // KILN_RUNTIME_MOEKERNELS_H
