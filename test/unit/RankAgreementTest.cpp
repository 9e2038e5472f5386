//===- RankAgreementTest.cpp - What ranks that disagree are told ----------===//
//
// describeDisagreement on settings as ranks would send them (the MPI exchange
// itself is in test/CLI/train-ranks-agree.test).
//
//===----------------------------------------------------------------------===//

#include "kiln/Driver/RankAgreement.h"
#include "kiln/Support/Error.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

using namespace kiln;

namespace {

RunSettings settings(const nlohmann::json &config) {
  RunSettings s;
  s.add("", config);
  return s;
}

nlohmann::json run(double lr, int64_t steps) {
  return {{"optimizer", {{"lr", lr}, {"betas", {0.9, 0.95}}}}, {"training", {{"steps", steps}}}};
}

TEST(RankAgreementTest, FlattensObjectsAndKeepsArraysWhole) {
  RunSettings s = settings(run(0.5, 3));
  ASSERT_EQ(s.entries().size(), 3u);
  EXPECT_EQ(s.entries()[0], std::make_pair(std::string("optimizer.betas"),
                                           std::string("[0.9,0.95]")));
  EXPECT_EQ(s.entries()[1], std::make_pair(std::string("optimizer.lr"), std::string("0.5")));
  EXPECT_EQ(s.entries()[2], std::make_pair(std::string("training.steps"), std::string("3")));
}

TEST(RankAgreementTest, AgreeingRanksHaveNothingToSay) {
  std::vector<RunSettings> ranks(4, settings(run(0.5, 3)));
  EXPECT_FALSE(describeDisagreement(ranks));
}

TEST(RankAgreementTest, NamesTheFirstSettingAndTheRanksOfEachValue) {
  std::vector<RunSettings> ranks(8, settings(run(0.5, 3)));
  ranks[3] = settings(run(0.25, 3));
  EXPECT_EQ(describeDisagreement(ranks),
            "'optimizer.lr' is 0.5 on ranks 0-2, 4-7 and 0.25 on rank 3");
  // Two settings differ: the first in rank 0's order is named, the count given.
  ranks.resize(4);
  ranks[1] = settings(run(0.25, 4));
  EXPECT_EQ(describeDisagreement(ranks), "'optimizer.lr' is 0.5 on ranks 0, 2 and 0.25 on "
                                         "ranks 1, 3 (2 settings differ in all)");
}

TEST(RankAgreementTest, ASettingOneRankLacksIsNotSet) {
  RunSettings extra = settings(run(0.5, 3));
  extra.add("resumed from", "out/step-2");
  std::vector<RunSettings> ranks = {settings(run(0.5, 3)), extra};
  EXPECT_EQ(describeDisagreement(ranks),
            "'resumed from' is not set on rank 0 and \"out/step-2\" on rank 1");
}

TEST(RankAgreementTest, ManyValuesAreCutAfterFour) {
  std::vector<RunSettings> ranks;
  for (int r = 0; r < 6; ++r)
    ranks.push_back(settings(run(0.5, r < 2 ? 1 : r)));
  EXPECT_EQ(describeDisagreement(ranks), "'training.steps' is 1 on ranks 0, 1, 2 on rank 2, 3 "
                                         "on rank 3, 4 on rank 4 and 1 other value");
}

TEST(RankAgreementTest, LongValuesAreCut) {
  std::string path(200, 'a');
  RunSettings a, b;
  a.add("data.path", path);
  b.add("data.path", "b");
  std::optional<std::string> text = describeDisagreement({a, b});
  ASSERT_TRUE(text);
  EXPECT_NE(text->find("\"" + path.substr(0, 76) + "... on rank 0"), std::string::npos) << *text;
}

TEST(RankAgreementTest, SerializesAndRefusesWhatIsNotSettings) {
  RunSettings s = settings(run(0.5, 3));
  RunSettings back = RunSettings::parse(s.serialize(), 1);
  EXPECT_EQ(back.entries(), s.entries());
  EXPECT_THROW(RunSettings::parse("{}", 1), Error);
  try {
    RunSettings::parse("[[\"a\", 1]]", 3);
    FAIL() << "a pair with a number for its value was accepted";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("rank 3"), std::string::npos) << e.what();
  }
}

} // namespace
