//===- TokenBatch.h - Fixed token batches from JSON -------------*- C++ -*-===//
#ifndef KILN_RUNTIME_TOKENBATCH_H
#define KILN_RUNTIME_TOKENBATCH_H

#include "kiln/Runtime/Tensor.h"

#include <string>
#include <vector>

namespace kiln {

/// Reads a JSON list of equal-length lists of non-negative token ids into an
/// I64 tensor [batch, length]. Throws kiln::Error naming the file and the
/// offending row.
Tensor readTokenBatch(const std::string &path);

/// A model's two data inputs from a window of tokens [batch, seq + 1]:
/// input_ids = tokens[:, :-1] and labels = tokens[:, 1:], both [batch, seq].
/// The split happens on the host, so every graph input is per position and
/// sequence sharding splits ids and labels alike (no halo exchange).
struct InputsAndLabels {
  Tensor inputIds, labels;
};
InputsAndLabels splitInputsAndLabels(const Tensor &tokens);
/// The same for each of `microbatches` consecutive blocks of rows (gradient
/// accumulation: microbatch m is rows [m * b, (m + 1) * b) of the step's
/// batch, b = batch / microbatches). Throws kiln::Error if they do not divide.
std::vector<InputsAndLabels> splitMicrobatches(const Tensor &tokens, int64_t microbatches);

/// A pipelined step's rows: `pieces` is its batch split (splitMicrobatches)
/// into runs x `groups` data-parallel row groups x `microbatches` schedule
/// microbatches, in that order. The piece group `group` runs as microbatch
/// `j` of schedule run `run`, and every group's piece j stacked in group
/// order (the microbatch partitioned stages split over the groups).
const InputsAndLabels &microbatchPiece(const std::vector<InputsAndLabels> &pieces, int64_t run,
                                       int64_t group, int64_t j, int64_t groups,
                                       int64_t microbatches);
InputsAndLabels stackedMicrobatch(const std::vector<InputsAndLabels> &pieces, int64_t run,
                                  int64_t j, int64_t groups, int64_t microbatches);

} // namespace kiln

#endif // KILN_RUNTIME_TOKENBATCH_H
