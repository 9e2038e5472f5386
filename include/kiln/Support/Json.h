//===- Json.h - Checked access to JSON documents ----------------*- C++ -*-===//
//
// A thin layer over nlohmann::json whose getters throw kiln::Error naming the
// source file and the field when a value is missing or has the wrong type.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_SUPPORT_JSON_H
#define KILN_SUPPORT_JSON_H

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>

namespace kiln {

/// Reads a whole file; throws kiln::Error naming it on failure. Anything but
/// a regular file ("is a FIFO, not a regular file", "is a directory, ...") is
/// refused before it is opened, so a FIFO never blocks the caller.
std::string readFile(const std::string &path);

/// What a non-regular file is ("a directory", "a FIFO", ...), for messages
/// such as "<path>: is a FIFO, not a regular file"; `mode` is stat's st_mode.
const char *fileKind(unsigned mode);

/// Writes `contents` to `path` atomically (temporaryPathFor, then rename).
void writeFileAtomic(const std::string &path, const std::string &contents);
/// The temporary writeFileAtomic writes first: `<path>.tmp.<pid>`, the
/// name cut short enough that the temporary fits the file system's name
/// limit whenever `path`'s own name does.
std::string temporaryPathFor(const std::string &path);
/// The longest file name the file system holding `dir` takes (NAME_MAX).
size_t maxFileNameBytes(const std::string &dir);

/// JSON nested deeper than this is refused before parsing: such a value can
/// only be hostile, and printing it in a message would recurse that deep.
inline constexpr int kMaxJsonDepth = 512;

/// The byte offset where `text` first nests deeper than kMaxJsonDepth, if it
/// does (brackets inside strings do not count).
std::optional<size_t> jsonTooDeep(const std::string &text);

/// `value` as JSON text for an error message, cut to 80 characters.
std::string briefJson(const nlohmann::json &value);

/// An integer that fits int64_t: nlohmann keeps larger ones unsigned, and
/// get<int64_t>() would wrap them negative (2^63 read as -2^63).
bool isInt64(const nlohmann::json &value);

/// Parses JSON text; throws kiln::Error "<source>: malformed JSON: ..." (or
/// naming the depth past kMaxJsonDepth, or an integer past int64_t's range,
/// which no Kiln input holds and every reader would misread).
nlohmann::json parseJson(const std::string &text, const std::string &source);

class JsonObject {
public:
  /// Parses `text`, which must hold a JSON object.
  static JsonObject parse(const std::string &text, const std::string &source);
  JsonObject(nlohmann::json value, std::string source);

  bool has(const std::string &field) const;
  const nlohmann::json &get(const std::string &field) const;
  std::string getString(const std::string &field) const;
  int64_t getInt(const std::string &field) const;
  double getNumber(const std::string &field) const;
  bool getBool(const std::string &field) const;
  const nlohmann::json &json() const { return value_; }
  const std::string &source() const { return source_; }

private:
  nlohmann::json value_;
  std::string source_;
};

} // namespace kiln

#endif // KILN_SUPPORT_JSON_H
