//===- CommandLine.cpp - Subcommand option parsing ------------------------===//

#include "kiln/Support/CommandLine.h"
#include "kiln/Support/Error.h"

#include <algorithm>

namespace kiln {

OptionList::OptionList(std::string command, const std::vector<std::string> &args,
                       const std::set<std::string> &flags)
    : command_(std::move(command)) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string &word = args[i];
    size_t dashes = word.rfind("--", 0) == 0 ? 2 : (word.rfind("-", 0) == 0 ? 1 : 0);
    if (!dashes || word.size() == dashes)
      fail("{}: unexpected argument '{}'", command_, word);
    std::string name = word.substr(dashes);
    size_t eq = name.find('=');
    if (eq != std::string::npos) {
      options_.push_back({name.substr(0, eq), name.substr(eq + 1)});
    } else if (flags.count(name)) {
      options_.push_back({name, std::nullopt});
    } else {
      if (i + 1 >= args.size())
        fail("{}: option '{}' needs a value", command_, word);
      options_.push_back({name, args[++i]});
    }
    // An option given twice would silently take one of the values.
    const std::string &added = options_.back().first;
    if (std::count_if(options_.begin(), options_.end(),
                      [&](const auto &o) { return o.first == added; }) > 1)
      fail("{}: option '--{}' is given twice", command_, added);
  }
}

bool OptionList::flag(const std::string &name) {
  auto it = std::find_if(options_.begin(), options_.end(),
                         [&](const auto &o) { return o.first == name; });
  if (it == options_.end())
    return false;
  if (it->second)
    fail("{}: option '--{}' takes no value", command_, name);
  options_.erase(it);
  return true;
}

std::optional<std::string> OptionList::value(const std::string &name) {
  auto it = std::find_if(options_.begin(), options_.end(),
                         [&](const auto &o) { return o.first == name; });
  if (it == options_.end())
    return std::nullopt;
  std::optional<std::string> v = it->second;
  options_.erase(it);
  return v;
}

std::string OptionList::required(const std::string &name) {
  std::optional<std::string> v = value(name);
  if (!v)
    fail("{}: missing required option '--{}'", command_, name);
  return *v;
}

int64_t OptionList::integer(const std::string &name, int64_t defaultValue) {
  std::optional<std::string> v = value(name);
  if (!v)
    return defaultValue;
  try {
    size_t used = 0;
    int64_t result = std::stoll(*v, &used);
    if (used == v->size())
      return result;
  } catch (const std::exception &) {
  }
  fail("{}: option '--{}' expects an integer, got '{}'", command_, name, *v);
}

void OptionList::finish() const {
  if (!options_.empty())
    fail("{}: unknown option '--{}'", command_, options_.front().first);
}

void splitConfigOverrides(const std::vector<std::string> &words, std::vector<std::string> &args,
                          std::vector<std::string> &overrides) {
  for (const std::string &w : words) {
    std::string name = w.substr(0, w.find('='));
    (w.rfind("--", 0) == 0 && name.find('.') != std::string::npos ? overrides : args)
        .push_back(w);
  }
}

void acceptTorchtitanConfigFile(std::vector<std::string> &words) {
  const std::string spelling = "--job.config_file";
  for (std::string &w : words)
    if (w == spelling)
      w = "--config";
    else if (w.rfind(spelling + "=", 0) == 0)
      w = "--config=" + w.substr(spelling.size() + 1);
}

} // namespace kiln
