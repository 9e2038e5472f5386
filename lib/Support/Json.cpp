//===- Json.cpp - Checked access to JSON documents ------------------------===//

#include "kiln/Support/Json.h"
#include "kiln/Support/Error.h"

#include <limits>
#include <vector>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <optional>
#include <sys/stat.h>
#include <unistd.h>

namespace kiln {

/// What a non-regular file is, for "<path>: is a FIFO, not a regular file".
const char *fileKind(unsigned mode) {
  return S_ISDIR(mode)    ? "a directory"
         : S_ISFIFO(mode) ? "a FIFO"
         : S_ISSOCK(mode) ? "a socket"
         : S_ISCHR(mode)  ? "a character device"
         : S_ISBLK(mode)  ? "a block device"
                          : "a special file";
}

std::string readFile(const std::string &path) {
  // Every user-given file comes through here, so refuse anything but a
  // regular file before opening it: open() on a FIFO blocks until a writer
  // appears, and a directory opens fine and reads as empty.
  struct stat st;
  if (::stat(path.c_str(), &st) != 0)
    fail("{}: cannot open: {}", path, std::strerror(errno));
  if (!S_ISREG(st.st_mode))
    fail("{}: is {}, not a regular file", path, fileKind(st.st_mode));
  // O_NONBLOCK: a FIFO swapped in after the check must not block open()
  // either; fstat() on the descriptor then refuses it.
  int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0)
    fail("{}: cannot open: {}", path, std::strerror(errno));
  auto failClosing = [&](const std::string &message) {
    ::close(fd);
    fail("{}: {}", path, message);
  };
  if (::fstat(fd, &st) != 0)
    failClosing(fmt::format("cannot stat: {}", std::strerror(errno)));
  if (!S_ISREG(st.st_mode))
    failClosing(fmt::format("is {}, not a regular file", fileKind(st.st_mode)));
  std::string contents;
  contents.reserve(size_t(st.st_size));
  char buf[1 << 16];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      failClosing(fmt::format("read failed: {}", std::strerror(errno)));
    if (n == 0)
      break;
    contents.append(buf, size_t(n));
  }
  ::close(fd);
  return contents;
}

size_t maxFileNameBytes(const std::string &dir) {
  long limit = ::pathconf(dir.empty() ? "." : dir.c_str(), _PC_NAME_MAX);
  return limit > 0 ? size_t(limit) : 255;
}

std::string temporaryPathFor(const std::string &path) {
  std::string suffix = fmt::format(".tmp.{}", getpid());
  size_t slash = path.rfind('/');
  size_t nameStart = slash == std::string::npos ? 0 : slash + 1;
  std::string dir = path.substr(0, nameStart), name = path.substr(nameStart);
  // A name near the limit keeps the suffix by losing its own end: the
  // temporary must be creatable whenever the name itself is.
  size_t limit = maxFileNameBytes(dir);
  if (name.size() + suffix.size() > limit && limit > suffix.size())
    name.resize(limit - suffix.size());
  return dir + name + suffix;
}

void writeFileAtomic(const std::string &path, const std::string &contents) {
  std::string tmp = temporaryPathFor(path);
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << contents;
    out.flush();
    if (!out) {
      std::remove(tmp.c_str());
      fail("{}: cannot write: {}", path, std::strerror(errno));
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    std::remove(tmp.c_str());
    fail("{}: cannot rename into place: {}", path, std::strerror(err));
  }
}

std::optional<size_t> jsonTooDeep(const std::string &text) {
  int depth = 0;
  bool inString = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (inString) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        inString = false;
    } else if (c == '"') {
      inString = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonDepth)
        return i;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return std::nullopt;
}

std::string briefJson(const nlohmann::json &value) {
  std::string text = value.dump();
  return text.size() <= 80 ? text : text.substr(0, 77) + "...";
}

nlohmann::json parseJson(const std::string &text, const std::string &source) {
  if (std::optional<size_t> at = jsonTooDeep(text))
    fail("{}: JSON nested deeper than {} levels (at byte {})", source, kMaxJsonDepth, *at);
  // The path of keys to the value being read, for the message.
  std::vector<std::string> path;
  auto refuseHugeIntegers = [&](int, nlohmann::json::parse_event_t event,
                                nlohmann::json &parsed) {
    using Event = nlohmann::json::parse_event_t;
    if (event == Event::object_start || event == Event::array_start)
      path.emplace_back();
    else if ((event == Event::object_end || event == Event::array_end) && !path.empty())
      path.pop_back();
    else if (event == Event::key && !path.empty())
      path.back() = parsed.get<std::string>();
    else if (event == Event::value && parsed.is_number_integer() && !isInt64(parsed)) {
      std::string where;
      for (const std::string &key : path)
        if (!key.empty())
          where += (where.empty() ? "" : ".") + key;
      fail("{}: {}{} is out of range: Kiln reads integers below 2^63", source,
           where.empty() ? "integer " : "'" + where + "' = ", parsed.dump());
    }
    return true;
  };
  try {
    return nlohmann::json::parse(text, refuseHugeIntegers);
  } catch (const nlohmann::json::exception &e) { // parse errors and number overflow
    fail("{}: malformed JSON: {}", source, e.what());
  }
}

JsonObject JsonObject::parse(const std::string &text, const std::string &source) {
  return JsonObject(parseJson(text, source), source);
}

JsonObject::JsonObject(nlohmann::json value, std::string source)
    : value_(std::move(value)), source_(std::move(source)) {
  if (!value_.is_object())
    fail("{}: expected a JSON object at the top level", source_);
}

bool JsonObject::has(const std::string &field) const {
  return value_.contains(field);
}

const nlohmann::json &JsonObject::get(const std::string &field) const {
  auto it = value_.find(field);
  if (it == value_.end())
    fail("{}: missing field '{}'", source_, field);
  return *it;
}

std::string JsonObject::getString(const std::string &field) const {
  const nlohmann::json &v = get(field);
  if (!v.is_string())
    fail("{}: field '{}' must be a string, got {}", source_, field, briefJson(v));
  return v.get<std::string>();
}

bool isInt64(const nlohmann::json &value) {
  return value.is_number_integer() &&
         !(value.is_number_unsigned() &&
           value.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max()));
}

int64_t JsonObject::getInt(const std::string &field) const {
  const nlohmann::json &v = get(field);
  if (!v.is_number_integer())
    fail("{}: field '{}' must be an integer, got {}", source_, field, briefJson(v));
  if (!isInt64(v))
    fail("{}: field '{}' must be below 2^63, got {}", source_, field, briefJson(v));
  return v.get<int64_t>();
}

double JsonObject::getNumber(const std::string &field) const {
  const nlohmann::json &v = get(field);
  if (!v.is_number())
    fail("{}: field '{}' must be a number, got {}", source_, field, briefJson(v));
  return v.get<double>();
}

bool JsonObject::getBool(const std::string &field) const {
  const nlohmann::json &v = get(field);
  if (!v.is_boolean())
    fail("{}: field '{}' must be true or false, got {}", source_, field, briefJson(v));
  return v.get<bool>();
}

} // namespace kiln
