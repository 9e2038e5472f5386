//===- KilnVocabParallelOps.td - Loss parallel ------------*- tablegen -*-===//
//
// Cross-entropy on logits split on their vocabulary over grid axes
// (torchtitan's loss parallel): the full [tokens, vocab] logits are never
// gathered. kiln-partition rewrites a kiln.cross_entropy (and its backward)
// whose vocabulary loop is split into these ops around explicit collectives:
//
//   %m  = kiln.vocab_parallel_max %logits            local row maxima
//   %gm = shard.all_reduce %m max over the vocabulary axes
//   %s  = kiln.vocab_parallel_stats %logits, %gm, %labels
//   %gs = shard.all_reduce %s sum over the vocabulary axes
//   %loss = kiln.vocab_parallel_loss %gm, %gs
//   %dlogits = kiln.vocab_parallel_loss_backward %logits, %labels, %seed, %gm, %gs
//
// `vocab_axes` are the grid axes (indices into the module's grid) the
// vocabulary is split over; a rank's shard starts at its block index along
// them times the local vocabulary size. Included from KilnOps.td.
//
//===----------------------------------------------------------------------===//

def Kiln_VocabParallelMaxOp : Kiln_Op<"vocab_parallel_max"> {
  let summary = "Maximum of each row of a vocabulary shard of logits";
  let description = [{
    logits `[..., vocab_shard]` -> f32 `[...]`.

    Example:

    ```mlir
    %m = kiln.vocab_parallel_max %logits {fqn = "loss"}
        : (tensor<2x128x75968xf32>) -> tensor<2x128xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$logits, StrAttr:$fqn);
  let results = (outs Kiln_F32Tensor:$max);
}

def Kiln_VocabParallelStatsOp : Kiln_Op<"vocab_parallel_stats"> {
  let summary = "Per row: sum of exp(logit - max) over the shard, and the label's logit";
  let description = [{
    For logits `[..., vocab_shard]`, the global row maxima `max [...]` and the
    labels `[...]` (global ids): f32 `[..., 2]` holding, per row,
    `sum_j exp(logits[j] - max)` over the shard and the label's logit when the
    shard holds the label, else 0. Summed over the vocabulary axes, these are
    the softmax denominator and the target logit of the whole row.

    Example:

    ```mlir
    %s = kiln.vocab_parallel_stats %logits, %gm, %labels {fqn = "loss", vocab_axes = array<i16: 2>}
        : (tensor<2x128x75968xf32>, tensor<2x128xf32>, tensor<2x128xi64>) -> tensor<2x128x2xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$logits, Kiln_F32Tensor:$max, Kiln_IdTensor:$labels,
                       DenseI16ArrayAttr:$vocab_axes, StrAttr:$fqn);
  let results = (outs Kiln_F32Tensor:$stats);
  let hasVerifier = 1;
}

def Kiln_VocabParallelLossOp : Kiln_Op<"vocab_parallel_loss"> {
  let summary = "Mean cross-entropy from the rows' maxima and summed statistics";
  let description = [{
    `sum over rows of (max + log(stats[..., 0]) - stats[..., 1])`, divided by
    the number of rows, or by `total_positions` when set (the rows are a
    rank's share of a batch split across ranks, as for kiln.cross_entropy).

    Example:

    ```mlir
    %loss = kiln.vocab_parallel_loss %gm, %gs {fqn = "loss"}
        : (tensor<2x128xf32>, tensor<2x128x2xf32>) -> tensor<f32>
    ```
  }];
  let arguments = (ins Kiln_F32Tensor:$max, Kiln_F32Tensor:$stats, StrAttr:$fqn,
                       OptionalAttr<I64Attr>:$total_positions);
  let results = (outs 0DTensorOf<[F32]>:$loss);
}

def Kiln_VocabParallelLossBackwardOp : Kiln_Op<"vocab_parallel_loss_backward"> {
  let summary = "(softmax - onehot) * loss_grad / positions on a vocabulary shard";
  let description = [{
    The gradient of kiln.vocab_parallel_loss with respect to the shard's
    logits: `exp(logits - max) / stats[..., 0]`, minus 1 at the label when
    the shard holds it, times `loss_grad` over the rows (or
    `total_positions`).

    Example:

    ```mlir
    %dl = kiln.vocab_parallel_loss_backward %logits, %labels, %seed, %gm, %gs
        {fqn = "loss", vocab_axes = array<i16: 2>}
        : (tensor<2x128x75968xf32>, tensor<2x128xi64>, tensor<f32>, tensor<2x128xf32>,
           tensor<2x128x2xf32>) -> tensor<2x128x75968xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$logits, Kiln_IdTensor:$labels,
                       Kiln_F32Tensor:$loss_grad, Kiln_F32Tensor:$max, Kiln_F32Tensor:$stats,
                       DenseI16ArrayAttr:$vocab_axes, StrAttr:$fqn,
                       OptionalAttr<I64Attr>:$total_positions);
  let results = (outs Kiln_FloatTensor:$logits_grad);
  let hasVerifier = 1;
}
