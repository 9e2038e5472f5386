//===- TokenizerFuzzer.cpp - libFuzzer target: the Qwen3 tokenizer ---------===//
//
// An input starting with '{' is a tokenizer.json: loaded, or refused with
// kiln::Error; a loaded one encodes and decodes a fixed text. Any other input
// is text for the tiny tokenizer in the seed corpus (KILN_FUZZ_TOKENIZER:
// Qwen3's configuration, regex and added tokens, with its first 120 merges):
// valid UTF-8 must encode, and NFC text must decode back to itself (none of
// its added tokens strips whitespace); invalid UTF-8 must be refused.

#include "FuzzInput.h"
#include "kiln/Data/Tokenizer.h"
#include "kiln/Support/Error.h"

#include <unicode/normalizer2.h>
#include <unicode/utf8.h>

#include <cstdio>
#include <cstdlib>
#include <string_view>

namespace {

bool isValidUtf8(std::string_view text) {
  int32_t i = 0, n = static_cast<int32_t>(text.size());
  while (i < n) {
    UChar32 c;
    U8_NEXT(text.data(), i, n, c);
    if (c < 0)
      return false;
  }
  return true;
}

bool isNfc(std::string_view text) {
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2 *nfc = icu::Normalizer2::getNFCInstance(status);
  icu::StringPiece piece(text.data(), static_cast<int32_t>(text.size()));
  return U_SUCCESS(status) && nfc->isNormalizedUTF8(piece, status) && U_SUCCESS(status);
}

[[noreturn]] void failCheck(const char *what, std::string_view text) {
  std::fprintf(stderr, "tokenizer fuzzer: %s for %zu bytes of text\n", what, text.size());
  std::abort();
}

void checkText(const kiln::Tokenizer &tok, std::string_view text) {
  bool valid = isValidUtf8(text);
  std::vector<int32_t> ids;
  try {
    ids = tok.encode(text);
  } catch (const kiln::Error &) {
    if (valid)
      failCheck("valid UTF-8 refused", text);
    return;
  }
  if (!valid)
    failCheck("invalid UTF-8 encoded", text);
  if (tok.decode(ids) != text && isNfc(text))
    failCheck("decode(encode(text)) != text", text);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char *>(data), size);
  if (!bytes.empty() && bytes.front() == '{') {
    kiln::fuzz::MemoryFile file(data, size);
    std::unique_ptr<kiln::Tokenizer> tok;
    std::vector<int32_t> ids;
    try {
      tok = kiln::Tokenizer::load(file.path());
      // A fuzzed regex may give up (PCRE2's match limit).
      ids = tok->encode("Hello <|im_start|>w\u00f6rld\n\n  42 caf\u00e9's");
    } catch (const kiln::Error &) {
      return 0;
    }
    // Every id encode gives must decode (an uncaught kiln::Error aborts).
    (void)tok->decode(ids);
    return 0;
  }
  static const std::unique_ptr<kiln::Tokenizer> tiny = kiln::Tokenizer::load(KILN_FUZZ_TOKENIZER);
  checkText(*tiny, bytes);
  return 0;
}
