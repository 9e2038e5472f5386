//===- ProgressLine.cpp - One line of progress for long work --------------===//

#include "kiln/Support/ProgressLine.h"

#include <chrono>
#include <cstdio>
#include <unistd.h>

namespace kiln {

namespace {
/// A terminal is redrawn at most this often.
constexpr double kInPlaceInterval = 0.1;
} // namespace

ProgressLine::ProgressLine(Mode mode, double intervalSeconds,
                           std::function<void(const std::string &)> write,
                           std::function<double()> now)
    : mode(mode), interval(mode == Mode::InPlace ? kInPlaceInterval : intervalSeconds),
      write(std::move(write)), now(std::move(now)), start(this->now()) {}

ProgressLine ProgressLine::onStderr(double intervalSeconds) {
  auto steady = [] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
  };
  auto toStderr = [](const std::string &text) {
    std::fwrite(text.data(), 1, text.size(), stderr);
    std::fflush(stderr);
  };
  return ProgressLine(::isatty(STDERR_FILENO) ? Mode::InPlace : Mode::Periodic, intervalSeconds,
                      toStderr, steady);
}

void ProgressLine::update(const std::string &text) {
  double t = now();
  // A periodic line waits a whole interval from the start, so short work
  // prints none; an in-place one shows at once.
  double since = lastShown < 0 ? (mode == Mode::InPlace ? interval : t - start) : t - lastShown;
  if (since < interval)
    return;
  lastShown = t;
  shown = true;
  write(mode == Mode::InPlace ? "\r" + text + "\x1b[K" : text + "\n");
}

void ProgressLine::finish() {
  if (mode == Mode::InPlace && shown)
    write("\r\x1b[K");
  shown = false;
}

} // namespace kiln
