//===- LrSchedule.cpp - torchtitan's warmup-stable-decay schedule ---------===//

#include "kiln/Runtime/LrSchedule.h"

#include <algorithm>
#include <cmath>

namespace kiln {

LrPhases lrPhases(int64_t steps, int64_t warmupSteps, std::optional<double> decayRatio) {
  LrPhases p;
  p.warmup = std::min(warmupSteps, steps);
  p.decay = decayRatio ? std::llround(double(steps) * *decayRatio) : steps - p.warmup;
  p.decay = std::min(p.decay, steps - p.warmup);
  p.stable = steps + 1 - p.warmup - p.decay;
  return p;
}

double lrFactor(int64_t step, const LrPhases &p, DecayType decayType, double minLrFactor) {
  if (step < p.warmup)
    return double(step + 1) / double(p.warmup);
  if (step < p.warmup + p.stable || p.decay == 0)
    return 1.0;
  double progress = double(step + 1 - p.warmup - p.stable) / double(p.decay);
  double factor = 0.0;
  switch (decayType) {
  case DecayType::Linear:
    factor = 1.0 - progress;
    break;
  case DecayType::Sqrt:
    factor = 1.0 - std::sqrt(progress);
    break;
  case DecayType::Cosine:
    factor = 0.5 * (1.0 + std::cos(M_PI * progress));
    break;
  }
  return minLrFactor + (1.0 - minLrFactor) * factor;
}

} // namespace kiln
