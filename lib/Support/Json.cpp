//===- Json.cpp - Checked access to JSON documents ------------------------===//

#include "kiln/Support/Json.h"
#include "kiln/Support/Error.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <unistd.h>

namespace kiln {

std::string readFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    fail("{}: cannot open: {}", path, std::strerror(errno));
  std::ostringstream contents;
  contents << in.rdbuf();
  if (in.bad())
    fail("{}: read failed", path);
  return contents.str();
}

void writeFileAtomic(const std::string &path, const std::string &contents) {
  std::string tmp = fmt::format("{}.tmp.{}", path, getpid());
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

nlohmann::json parseJson(const std::string &text, const std::string &source) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error &e) {
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
    fail("{}: field '{}' must be a string, got {}", source_, field, v.dump());
  return v.get<std::string>();
}

int64_t JsonObject::getInt(const std::string &field) const {
  const nlohmann::json &v = get(field);
  if (!v.is_number_integer())
    fail("{}: field '{}' must be an integer, got {}", source_, field, v.dump());
  return v.get<int64_t>();
}

double JsonObject::getNumber(const std::string &field) const {
  const nlohmann::json &v = get(field);
  if (!v.is_number())
    fail("{}: field '{}' must be a number, got {}", source_, field, v.dump());
  return v.get<double>();
}

bool JsonObject::getBool(const std::string &field) const {
  const nlohmann::json &v = get(field);
  if (!v.is_boolean())
    fail("{}: field '{}' must be true or false, got {}", source_, field, v.dump());
  return v.get<bool>();
}

} // namespace kiln
