//===- Glob.h - Python fnmatch patterns over module paths --------*- C++ -*-===//
//
// Override rules select modules by torchtitan fqn with Python's fnmatch
// semantics, anchored at both ends: `*` matches any run of characters (dots
// included), `?` one character, `[seq]` one character of seq (ranges `a-z`,
// a leading `]` taken literally), `[!seq]` one character not in seq. Where
// Python reads an unclosed `[` as a literal, Kiln rejects the pattern: in a
// module path it is a typo, not an intent.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_SUPPORT_GLOB_H
#define KILN_SUPPORT_GLOB_H

#include <string>

namespace kiln {

/// Why `pattern` is not a valid glob, or "" when it is.
std::string globError(const std::string &pattern);
/// Whether `text` matches all of `pattern` (which must be valid).
bool globMatch(const std::string &pattern, const std::string &text);

} // namespace kiln

#endif // KILN_SUPPORT_GLOB_H
