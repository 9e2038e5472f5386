//===- BackwardKernels.h - Host kernels for gradients and AdamW -*- C++ -*-===//
//
// The vector-Jacobian products of the forward kernels in Kernels.h, and the
// optimizer kernels (global gradient norm, AdamW). Same conventions: float
// tensors are F32, ids I64/I32, shapes verified by the IR; reductions
// accumulate in double where they sum many terms.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_RUNTIME_BACKWARDKERNELS_H
#define KILN_RUNTIME_BACKWARDKERNELS_H

#include "kiln/Runtime/ForwardKernels.h"
#include "kiln/Runtime/Tensor.h"

#include <tuple>
#include <utility>
#include <vector>

namespace kiln::kernels {

/// d table [vocab, D] = scatter-add of grad [..., D] rows at ids [...];
/// with a shard, the `vocab` rows it holds (ids elsewhere add nothing).
Tensor embeddingBackward(const Tensor &grad, const Tensor &ids, int64_t vocab,
                         VocabShard shard = {});

/// y = w * x * rsqrt(mean(x^2) + eps) over the last dim; returns (dx, dw).
std::pair<Tensor, Tensor> rmsNormBackward(const Tensor &grad, const Tensor &x,
                                          const Tensor &weight, float eps);

/// y = x @ w^T: dx [..., K] = grad [..., N] @ w [N, K].
Tensor linearBackwardData(const Tensor &grad, const Tensor &weight);
/// dw [N, K] = sum over leading dims of grad [..., N]^T x [..., K].
Tensor linearBackwardWeight(const Tensor &grad, const Tensor &x);

/// VJP of rope(x, cache) for one tensor [b, s, heads, d]: rotation by -angle.
Tensor ropeBackward(const Tensor &grad, const Tensor &cache);

/// VJP of attention: (dq, dk, dv) from dout and the forward's q, k, v, out and
/// lse [b, h, s_q]. GQA: dk/dv sum over the query heads sharing a kv head; on
/// a block of the queries they are the block's share.
std::tuple<Tensor, Tensor, Tensor> attentionBackward(const Tensor &dout, const Tensor &q,
                                                     const Tensor &k, const Tensor &v,
                                                     const Tensor &out, const Tensor &lse,
                                                     bool causal, float scale,
                                                     const AttentionBlock &block = {});

/// out = silu(gate) * up: returns (dgate, dup).
std::pair<Tensor, Tensor> swigluBackward(const Tensor &dout, const Tensor &gate,
                                         const Tensor &up);

/// d logits of mean cross-entropy, scaled by the scalar dloss:
/// (softmax(row) - onehot(label)) * dloss / rows.
Tensor crossEntropyBackward(const Tensor &logits, const Tensor &labels, const Tensor &dloss);

/// sqrt(sum of squares of every element of every tensor), as an F32 scalar.
Tensor globalNorm(const std::vector<Tensor> &tensors);
/// Sum of squares of every element of every tensor, in double (the part of a
/// global norm that ranks holding shards add up before the root).
double sumOfSquares(const std::vector<Tensor> &tensors);

struct AdamWHyper {
  double lr;          ///< this update's learning rate
  double beta1, beta2, eps, weightDecay;
  int64_t step;       ///< 1-based index of this update (bias correction)
  double gradScale;   ///< clipping coefficient applied to grad first
};

/// One torch.optim.AdamW update (decoupled weight decay p *= 1 - lr*wd,
/// m = lerp(m, g, 1-beta1), v = beta2 v + (1-beta2) g^2,
/// p -= lr/(1-beta1^t) * m / (sqrt(v)/sqrt(1-beta2^t) + eps)), with
/// g = grad * gradScale. Returns the updated (param, m, v), written in place
/// into any of the three inputs that is uniquely owned.
std::tuple<Tensor, Tensor, Tensor> adamw(Tensor param, const Tensor &grad, Tensor m,
                                         Tensor v, const AdamWHyper &hyper);

} // namespace kiln::kernels

#endif // KILN_RUNTIME_BACKWARDKERNELS_H
