//===- GlobTest.cpp - fnmatch patterns over module paths ------------------===//
//
// Expected results are Python's fnmatch.fnmatchcase on the same inputs.
//
//===----------------------------------------------------------------------===//

#include "kiln/Support/Glob.h"

#include <gtest/gtest.h>

using namespace kiln;

namespace {

TEST(GlobTest, MatchesAsPythonFnmatch) {
  struct Case {
    const char *pattern, *text;
    bool match;
  } cases[] = {
      {"layers.1[0-9].attention.rope", "layers.10.attention.rope", true},
      {"layers.1[0-9].attention.rope", "layers.19.attention.rope", true},
      {"layers.1[0-9].attention.rope", "layers.1.attention.rope", false},
      {"layers.1[0-9].attention.rope", "layers.100.attention.rope", false},
      {"layers.1[0-9].attention.rope", "layers.20.attention.rope", false},
      {"layers.*.attention.rope", "layers.3.attention.rope", true},
      {"*rope", "layers.3.attention.rope", true}, // '*' crosses dots
      {"*", "", true},
      {"layers.?", "layers.7", true},
      {"layers.?", "layers.17", false},
      {"layers.[!0-4]", "layers.5", true},
      {"layers.[!0-4]", "layers.3", false},
      {"a[]]b", "a]b", true},   // a leading ']' is literal
      {"a[!]]b", "a]b", false},
      {"a[a-]b", "a-b", true},  // a trailing '-' is literal
      {"layers.1", "layers.10", false}, // anchored at the end
      {"ayers.1", "layers.1", false},   // and at the start
      {"*.*.*", "a.b", false},
      {"**a*", "bbba", true},
      {"a*a*a*a*a*a*b", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", false},
  };
  for (const Case &c : cases) {
    ASSERT_EQ(globError(c.pattern), "") << c.pattern;
    EXPECT_EQ(globMatch(c.pattern, c.text), c.match) << c.pattern << " vs " << c.text;
  }
}

TEST(GlobTest, RejectsBadPatterns) {
  EXPECT_NE(globError("layers.[0-9.rope").find("never closed"), std::string::npos);
  EXPECT_NE(globError("layers.[9-0]").find("range '9-0'"), std::string::npos);
  EXPECT_NE(globError(""), "");
}

} // namespace
