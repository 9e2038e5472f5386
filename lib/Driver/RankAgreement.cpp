//===- RankAgreement.cpp - Every MPI rank runs the same job ---------------===//

#include "kiln/Driver/RankAgreement.h"
#include "kiln/Backend/CPU/DeviceGrid.h"
#include "kiln/Support/Error.h"
#include "kiln/Support/Fnv128.h"
#include "kiln/Support/Json.h"

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>
#include <set>

namespace kiln {

namespace {

/// "rank 1", "ranks 0, 2, 3", "ranks 0-2, 5": ranks ascending, runs of three or more as ranges.
std::string describeRanks(const std::vector<int> &ranks) {
  std::string out = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1)
      ++j;
    if (i)
      out += ", ";
    out += j >= i + 2 ? fmt::format("{}-{}", ranks[i], ranks[j])
                      : fmt::format("{}", ranks[i]);
    if (j == i + 1)
      out += fmt::format(", {}", ranks[j]);
    i = j + 1;
  }
  return out;
}

/// A value as the message shows it: JSON cut to 80 characters.
std::string describeValue(const std::optional<std::string> &json) {
  if (!json)
    return "not set";
  return json->size() <= 80 ? *json : json->substr(0, 77) + "...";
}

} // namespace

void RunSettings::add(const std::string &name, const nlohmann::json &value) {
  if (value.is_object() && !value.empty()) {
    for (const auto &[key, member] : value.items())
      add(name.empty() ? key : name + "." + key, member);
    return;
  }
  entries_.emplace_back(name, value.dump());
}

std::string RunSettings::serialize() const { return nlohmann::json(entries_).dump(); }

RunSettings RunSettings::parse(const std::string &text, int rank) {
  nlohmann::json pairs = nlohmann::json::parse(text, nullptr, false);
  RunSettings out;
  if (!pairs.is_array())
    fail("the settings rank {} sent are not a JSON array", rank);
  for (const nlohmann::json &pair : pairs) {
    if (!pair.is_array() || pair.size() != 2 || !pair[0].is_string() || !pair[1].is_string())
      fail("the settings rank {} sent hold {}, not a [name, value] pair", rank,
           briefJson(pair));
    out.entries_.emplace_back(pair[0].get<std::string>(), pair[1].get<std::string>());
  }
  return out;
}

std::optional<std::string> describeDisagreement(const std::vector<RunSettings> &byRank) {
  // Each rank's settings by name, and every name in order of first mention.
  std::vector<std::map<std::string, std::string>> values(byRank.size());
  std::vector<std::string> names;
  std::set<std::string> seen;
  for (size_t r = 0; r < byRank.size(); ++r)
    for (const auto &[name, value] : byRank[r].entries()) {
      values[r].emplace(name, value);
      if (seen.insert(name).second)
        names.push_back(name);
    }
  auto valueOn = [&](size_t r, const std::string &name) -> std::optional<std::string> {
    auto it = values[r].find(name);
    return it == values[r].end() ? std::nullopt : std::optional<std::string>(it->second);
  };
  std::optional<std::string> first;
  int differing = 0;
  for (const std::string &name : names) {
    // The ranks holding each value, values in order of their first rank.
    std::vector<std::pair<std::optional<std::string>, std::vector<int>>> groups;
    for (size_t r = 0; r < byRank.size(); ++r) {
      std::optional<std::string> value = valueOn(r, name);
      auto it = std::find_if(groups.begin(), groups.end(),
                             [&](const auto &group) { return group.first == value; });
      if (it == groups.end())
        groups.push_back({value, {int(r)}});
      else
        it->second.push_back(int(r));
    }
    if (groups.size() == 1)
      continue;
    ++differing;
    if (first)
      continue;
    constexpr size_t kShown = 4;
    std::string text = fmt::format("'{}' is ", name);
    for (size_t g = 0; g < groups.size() && g < kShown; ++g) {
      if (g)
        text += g + 1 == std::min(groups.size(), kShown) && groups.size() <= kShown ? " and "
                                                                                      : ", ";
      text += fmt::format("{} on {}", describeValue(groups[g].first),
                          describeRanks(groups[g].second));
    }
    if (groups.size() > kShown)
      text += fmt::format(" and {} other value{}", groups.size() - kShown,
                          groups.size() - kShown == 1 ? "" : "s");
    first = text;
  }
  if (!first)
    return std::nullopt;
  return differing == 1 ? *first
                        : fmt::format("{} ({} settings differ in all)", *first, differing);
}

void requireRanksAgree(const RunSettings &mine, const std::string &what) {
  const MpiWorld &world = MpiWorld::get();
  if (world.size() == 1)
    return;
  // The digests first: a few bytes a rank when the ranks agree, as they do.
  std::string text = mine.serialize();
  Fnv128 digest;
  digest.string(text);
  std::vector<std::string> digests = world.allGatherText(digest.hex());
  if (std::all_of(digests.begin(), digests.end(),
                  [&](const std::string &d) { return d == digests.front(); }))
    return;
  std::vector<std::string> texts = world.allGatherText(text);
  std::vector<RunSettings> byRank;
  for (size_t r = 0; r < texts.size(); ++r)
    byRank.push_back(RunSettings::parse(texts[r], int(r)));
  std::optional<std::string> difference = describeDisagreement(byRank);
  fail("the ranks disagree on {}: {}; start every rank with the same run config, command "
       "line, model and data",
       what, difference.value_or("their settings differ in order only"));
}

} // namespace kiln
