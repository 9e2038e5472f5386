//===- ProgressLine.h - One line of progress for long work --------*- C++ -*-===//
//
// Long work (kiln plan --search) says how far it is on stderr, as build
// tools do: on a terminal one line rewritten in place, at most ten times a
// second and cleared when the work ends; into a file or a pipe (a log, a
// test) a plain line only once the work has run an interval, then one per
// interval, so short runs print nothing.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_SUPPORT_PROGRESSLINE_H
#define KILN_SUPPORT_PROGRESSLINE_H

#include <functional>
#include <string>

namespace kiln {

class ProgressLine {
public:
  enum class Mode {
    InPlace,  ///< a terminal: "\r<text>\x1b[K", cleared by finish()
    Periodic, ///< anything else: "<text>\n" every interval
  };

  /// Writes `text` somewhere; `now` is seconds on a monotonic clock.
  ProgressLine(Mode mode, double intervalSeconds, std::function<void(const std::string &)> write,
               std::function<double()> now);

  /// On stderr: in place when it is a terminal, else a line every
  /// `intervalSeconds`.
  static ProgressLine onStderr(double intervalSeconds = 10);

  /// The work's state now; shown when the mode's interval allows.
  void update(const std::string &text);
  /// The work is done: an in-place line is cleared (the report follows).
  void finish();

private:
  Mode mode;
  double interval;
  std::function<void(const std::string &)> write;
  std::function<double()> now;
  double start, lastShown = -1;
  bool shown = false;
};

} // namespace kiln

#endif // KILN_SUPPORT_PROGRESSLINE_H
