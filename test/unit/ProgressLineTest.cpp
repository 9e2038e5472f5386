//===- ProgressLineTest.cpp - ProgressLine's modes ------------------------===//

#include "kiln/Support/ProgressLine.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

using namespace kiln;

namespace {
struct Recorder {
  double clock = 100;
  std::vector<std::string> written;
  ProgressLine line(ProgressLine::Mode mode, double interval) {
    return ProgressLine(
        mode, interval, [this](const std::string &t) { written.push_back(t); },
        [this] { return clock; });
  }
};
} // namespace

TEST(ProgressLineTest, PeriodicPrintsNothingForShortWorkThenOneLinePerInterval) {
  Recorder r;
  ProgressLine line = r.line(ProgressLine::Mode::Periodic, 10);
  r.clock = 105;
  line.update("a");
  EXPECT_TRUE(r.written.empty()); // under one interval from the start
  r.clock = 110;
  line.update("b");
  r.clock = 115;
  line.update("c"); // 5 s after the last line
  r.clock = 120.5;
  line.update("d");
  line.finish(); // nothing to clear in a log
  EXPECT_EQ(r.written, (std::vector<std::string>{"b\n", "d\n"}));
}

TEST(ProgressLineTest, InPlaceRewritesAtMostTenTimesASecondAndClearsAtTheEnd) {
  Recorder r;
  ProgressLine line = r.line(ProgressLine::Mode::InPlace, 10);
  line.update("a"); // at once
  r.clock += 0.05;
  line.update("b"); // too soon
  r.clock += 0.06;
  line.update("c");
  line.finish();
  EXPECT_EQ(r.written, (std::vector<std::string>{"\ra\x1b[K", "\rc\x1b[K", "\r\x1b[K"}));
}

TEST(ProgressLineTest, InPlaceThatShowedNothingClearsNothing) {
  Recorder r;
  ProgressLine line = r.line(ProgressLine::Mode::InPlace, 10);
  line.finish();
  EXPECT_TRUE(r.written.empty());
}
