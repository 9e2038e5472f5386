//===- Error.h - Kiln's user-facing error type ------------------*- C++ -*-===//
//
// Everything that reads user input (configs, checkpoints, token files, CLI
// flags) reports problems by throwing kiln::Error with a message that names
// the file, the field or the op and what was expected. The tools catch it at
// the top level, print "error: <message>" and exit non-zero.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_SUPPORT_ERROR_H
#define KILN_SUPPORT_ERROR_H

#include <fmt/format.h>
#include <stdexcept>
#include <string>

namespace kiln {

class Error : public std::runtime_error {
public:
  explicit Error(const std::string &message) : std::runtime_error(message) {}
};

/// Throws kiln::Error with an fmt-formatted message.
template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> format, Args &&...args) {
  throw Error(fmt::format(format, std::forward<Args>(args)...));
}

} // namespace kiln

#endif // KILN_SUPPORT_ERROR_H
