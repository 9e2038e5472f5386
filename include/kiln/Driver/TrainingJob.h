//===- TrainingJob.h - A whole `kiln train` run -----------------*- C++ -*-===//
//
// Everything around the Trainer that a run needs: the data (a fixed token
// batch, or a corpus tokenized, packed and held out by the DataLoader), the
// plan printed before the first step, per-step console lines and a progress
// bar, validation every metrics.eval_freq steps, JSON Lines metrics, the loss
// curve, Hugging Face checkpoints, and a clean stop on Ctrl-C (SIGINT): the
// current step finishes, the last checkpoint is written, metrics are closed.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_DRIVER_TRAININGJOB_H
#define KILN_DRIVER_TRAININGJOB_H

#include "kiln/Driver/TrainConfig.h"

namespace kiln {

/// Runs `config`; returns the process exit status (0, or 130 after SIGINT).
int runTrainingJob(const TrainConfig &config);

} // namespace kiln

#endif // KILN_DRIVER_TRAININGJOB_H
