//===- LrSchedule.h - torchtitan's warmup-stable-decay schedule -*- C++ -*-===//
#ifndef KILN_RUNTIME_LRSCHEDULE_H
#define KILN_RUNTIME_LRSCHEDULE_H

#include "kiln/Support/ClosedSets.h"

#include <cstdint>
#include <optional>

namespace kiln {

/// The three phases of a run, in updates.
struct LrPhases {
  int64_t warmup = 0, stable = 0, decay = 0;
};

/// torchtitan's split of `steps` updates: warmup (clamped to steps), decay =
/// round(steps * decayRatio) (or everything after warmup when no ratio is
/// given), clamped so warmup + decay <= steps, and stable the rest plus one
/// virtual step so the last update's rate is not zero.
LrPhases lrPhases(int64_t steps, int64_t warmupSteps, std::optional<double> decayRatio);

/// Multiplier of the base rate for the 0-based update `step`; the decay goes
/// from 1 to minLrFactor.
double lrFactor(int64_t step, const LrPhases &phases, DecayType decayType, double minLrFactor);

} // namespace kiln

#endif // KILN_RUNTIME_LRSCHEDULE_H
