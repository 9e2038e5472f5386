//===- Paths.cpp - Where Kiln keeps fetched assets ------------------------===//

#include "kiln/Support/Paths.h"

#include <cstdlib>

namespace kiln {

std::string assetCacheDir() {
  if (const char *cache = std::getenv("KILN_CACHE"); cache && *cache)
    return cache;
  const char *home = std::getenv("HOME");
  return std::string(home && *home ? home : "/tmp") + "/.cache/kiln";
}

} // namespace kiln
