//===- LossParallel.h - Cross-entropy on vocabulary shards ------*- C++ -*-===//
//
// The host kernels of the vocab_parallel ops (loss parallel): each rank
// holds logits [..., V/n] for a block of the vocabulary; the rows' maxima
// and statistics are combined across ranks by collectives between these
// kernels, so no rank ever holds a whole row.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_RUNTIME_LOSSPARALLEL_H
#define KILN_RUNTIME_LOSSPARALLEL_H

#include "kiln/Runtime/ForwardKernels.h"

namespace kiln::kernels {

/// logits [..., Vs] -> f32 [...]: each row's maximum.
Tensor rowMax(const Tensor &logits);

/// logits [..., Vs], global row maxima [...], labels [...] (global ids) ->
/// f32 [..., 2]: per row, sum_j exp(logits[j] - max) over the shard, and the
/// label's logit when `shard` holds it, else 0.
Tensor vocabShardStats(const Tensor &logits, const Tensor &max, const Tensor &labels,
                       VocabShard shard);

/// sum over rows of (max + log(stats[0]) - stats[1]), divided by
/// `positions`: the mean cross-entropy from summed statistics.
Tensor lossFromStats(const Tensor &max, const Tensor &stats, int64_t positions);

/// d logits [..., Vs] = (exp(logits - max) / stats[0] - onehot(label)) *
/// lossGrad / positions, the one-hot where the shard holds the label.
Tensor lossFromStatsBackward(const Tensor &logits, const Tensor &labels, float lossGrad,
                             const Tensor &max, const Tensor &stats, VocabShard shard,
                             int64_t positions);

} // namespace kiln::kernels

#endif // KILN_RUNTIME_LOSSPARALLEL_H
