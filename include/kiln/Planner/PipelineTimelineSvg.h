//===- PipelineTimelineSvg.h - A pipeline schedule drawn as SVG ---*- C++ -*-===//
//
// A simulated pipeline schedule (Config/PipelineSchedule.h: simulate) as an
// SVG picture: a row per pipeline rank, each forward and backward a box at
// its simulated time labelled with its microbatch, coloured by kind and by
// the rank's stage (interleaved schedules hold several), the idle time (the
// bubble) left blank. `kiln capture --dump-ranks` writes one for the run's
// schedule; docs/parallelism.md shows them.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_PLANNER_PIPELINETIMELINESVG_H
#define KILN_PLANNER_PIPELINETIMELINESVG_H

#include "kiln/Config/PipelineSchedule.h"

#include <string>

namespace kiln {

/// `timeline` (simulate's, of `schedule`) as a standalone SVG document
/// titled `title`; the same inputs give the same bytes.
std::string pipelineTimelineSvg(const PipelineSchedule &schedule, const PipelineTimeline &timeline,
                                const std::string &title);

} // namespace kiln

#endif // KILN_PLANNER_PIPELINETIMELINESVG_H
