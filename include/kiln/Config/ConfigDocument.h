//===- ConfigDocument.h - A run config file, JSON or TOML -------*- C++ -*-===//
//
// `--config FILE` reads Kiln's JSON run configs and torchtitan's TOML ones
// (a `.toml` file; torchtitan's `--job.config_file`): both become the same
// sections of keys, so one parser checks both (TrainConfig.cpp). A TOML
// file keeps each key's line, so that an error names file, line and key.
// torchtitan keys Kiln has no use for are set aside, each with its reason,
// for one warning line.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_CONFIG_CONFIGDOCUMENT_H
#define KILN_CONFIG_CONFIGDOCUMENT_H

#include <nlohmann/json.hpp>

#include <map>
#include <string>
#include <vector>

namespace kiln {

struct ConfigDocument {
  std::string path;
  /// The sections, each an object of keys (as the file wrote them: a
  /// section that is not a table stays what it is, for the parser's error).
  nlohmann::json sections = nlohmann::json::object();
  /// TOML: "section.key" -> the line it is on.
  std::map<std::string, int64_t> lines;
  /// torchtitan keys without a use in Kiln that the file set ("job.dump_folder").
  std::vector<std::string> ignored;

  /// Reads `path`: TOML when it ends in .toml, JSON otherwise. Throws
  /// kiln::Error naming the file (and for TOML the line and column) when it
  /// does not parse, or holds a value no JSON key could (a date).
  static ConfigDocument read(const std::string &path);
  /// TOML `text`, named `path` in errors.
  static ConfigDocument parseToml(const std::string &text, const std::string &path);
  /// Where `section.key` was set: "run.toml:12" for TOML, the path for JSON.
  std::string where(const std::string &section, const std::string &key) const;
};

/// A torchtitan key Kiln accepts in a TOML file and ignores.
struct TorchtitanKey {
  std::string name; ///< "section.key", or "section.*" for a whole section
  std::string why;
  /// The one value it may have (the feature off), JSON; null: any value.
  nlohmann::json only;
};

/// Those keys, for the reader and for docs/cli.md.
const std::vector<TorchtitanKey> &torchtitanKeysWithoutUse();

} // namespace kiln

#endif // KILN_CONFIG_CONFIGDOCUMENT_H
