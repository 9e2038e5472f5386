//===- Paths.h - Where Kiln keeps fetched assets ----------------*- C++ -*-===//
#ifndef KILN_SUPPORT_PATHS_H
#define KILN_SUPPORT_PATHS_H

#include <string>

namespace kiln {

/// The asset cache scripts/fetch-assets.sh fills: $KILN_CACHE, else
/// $HOME/.cache/kiln. Holds qwen3/tokenizer.json, brown/ and tokens/.
std::string assetCacheDir();

} // namespace kiln

#endif // KILN_SUPPORT_PATHS_H
