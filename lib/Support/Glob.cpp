//===- Glob.cpp - Python fnmatch patterns over module paths ---------------===//

#include "kiln/Support/Glob.h"

#include <vector>

namespace kiln {

namespace {

/// The end of the set starting at pattern[open] == '[' (the index of its
/// ']'), or npos when it is unclosed.
size_t setEnd(const std::string &pattern, size_t open) {
  size_t i = open + 1;
  if (i < pattern.size() && pattern[i] == '!')
    ++i;
  if (i < pattern.size() && pattern[i] == ']') // a leading ']' is literal
    ++i;
  size_t close = pattern.find(']', i);
  return close;
}

/// Calls `visit(lo, hi, offset)` for each character (lo == hi) or range of
/// the set pattern[open..close]; returns whether it is negated.
template <typename Visit>
bool forEachRange(const std::string &pattern, size_t open, size_t close, Visit visit) {
  size_t i = open + 1;
  bool negate = i < close && pattern[i] == '!';
  if (negate)
    ++i;
  while (i < close) {
    // `a-z` is a range when '-' is not the set's last character.
    if (i + 2 < close && pattern[i + 1] == '-') {
      visit(pattern[i], pattern[i + 2], i);
      i += 3;
    } else {
      visit(pattern[i], pattern[i], i);
      ++i;
    }
  }
  return negate;
}

bool inSet(const std::string &pattern, size_t open, size_t close, char c) {
  bool found = false;
  bool negate = forEachRange(pattern, open, close,
                             [&](char lo, char hi, size_t) { found |= lo <= c && c <= hi; });
  return found != negate;
}

} // namespace

std::string globError(const std::string &pattern) {
  if (pattern.empty())
    return "an empty pattern matches nothing";
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] != '[')
      continue;
    size_t close = setEnd(pattern, i);
    if (close == std::string::npos)
      return "'[' at offset " + std::to_string(i) + " is never closed by ']'";
    std::string error;
    forEachRange(pattern, i, close, [&](char lo, char hi, size_t at) {
      if (lo > hi && error.empty())
        error = std::string("range '") + lo + "-" + hi + "' at offset " + std::to_string(at) +
                " is empty";
    });
    if (!error.empty())
      return error;
    i = close;
  }
  return "";
}

bool globMatch(const std::string &pattern, const std::string &text) {
  // Iterative matching with one backtrack point: the last '*' seen and the
  // text position it has consumed up to (linear in practice, never
  // exponential).
  size_t p = 0, t = 0, starP = std::string::npos, starT = 0;
  while (t < text.size()) {
    if (p < pattern.size()) {
      char c = pattern[p];
      if (c == '*') {
        starP = p++;
        starT = t;
        continue;
      }
      if (c == '?') {
        ++p, ++t;
        continue;
      }
      if (c == '[') {
        size_t close = setEnd(pattern, p);
        if (inSet(pattern, p, close, text[t])) {
          p = close + 1, ++t;
          continue;
        }
      } else if (c == text[t]) {
        ++p, ++t;
        continue;
      }
    }
    if (starP == std::string::npos)
      return false;
    p = starP + 1;
    t = ++starT;
  }
  while (p < pattern.size() && pattern[p] == '*')
    ++p;
  return p == pattern.size();
}

} // namespace kiln
