//===- SelectiveAcOption.cpp - Parsing torchtitan's selective_ac_option ---===//
//
// Its own translation unit, free of MLIR, so that the run-config parser (and
// its fuzzer) can link it without the passes.
//
//===----------------------------------------------------------------------===//

#include "kiln/Config/SelectiveAcOption.h"

#include <charconv>

std::optional<kiln::SelectiveAcOption> kiln::parseSelectiveAcOption(std::string_view text) {
  if (text == "op")
    return kiln::SelectiveAcOption{true, 0};
  // from_chars alone would take a leading '-' and stop at the first non-digit.
  if (text.empty() || text.find_first_not_of("0123456789") != std::string_view::npos)
    return std::nullopt;
  int64_t every = 0;
  if (std::from_chars(text.data(), text.data() + text.size(), every).ec != std::errc() ||
      every <= 0)
    return std::nullopt;
  return kiln::SelectiveAcOption{false, every};
}
