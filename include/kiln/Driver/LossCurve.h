//===- LossCurve.h - Training and validation loss as an SVG -----*- C++ -*-===//
#ifndef KILN_DRIVER_LOSSCURVE_H
#define KILN_DRIVER_LOSSCURVE_H

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace kiln {

using LossPoints = std::vector<std::pair<int64_t, double>>; ///< (step, loss)

/// A self-contained SVG chart: train loss as a line, validation loss as a
/// line with markers, axes with step and loss ticks, a legend and `title`.
std::string lossCurveSvg(const LossPoints &train, const LossPoints &validation,
                         const std::string &title);

} // namespace kiln

#endif // KILN_DRIVER_LOSSCURVE_H
