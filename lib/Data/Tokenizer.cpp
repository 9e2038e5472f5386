//===- Tokenizer.cpp - Qwen3's byte-level BPE tokenizer -------------------===//
//
// Reproduces what Hugging Face `tokenizers` does with Qwen3's tokenizer.json:
//
//   1. added tokens are cut out of the raw text first (longest match at each
//      position), so that normalization and the regex never see them;
//   2. every gap between them is NFC-normalized (ICU);
//   3. the Split pre-tokenizer's regex (PCRE2) cuts the gap into pre-tokens,
//      "Isolated": matches and the text between them are both pre-tokens;
//   4. ByteLevel maps each pre-token byte to one symbol of the GPT-2 byte
//      alphabet, whose single-symbol tokens are the BPE's starting point;
//   5. BPE applies merges lowest rank first until none applies.
//
// Only the configuration Qwen3 uses is accepted; anything else is reported
// as an error naming the file and the field, rather than being silently
// tokenized differently from the reference implementation.
//
// Known divergence: Hugging Face compiles the pattern with Oniguruma, whose
// \s also matches U+0085 (NEXT LINE); PCRE2's \s (UCP mode) does not. Text
// containing U+0085 may therefore be split differently (still round-trips).
//
//===----------------------------------------------------------------------===//

#include "kiln/Data/Tokenizer.h"
#include "kiln/Support/Error.h"
#include "kiln/Support/Json.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <unicode/bytestream.h>
#include <unicode/normalizer2.h>
#include <unicode/uchar.h>
#include <unicode/utf8.h>

#include <algorithm>
#include <array>
#include <mutex>
#include <queue>
#include <unordered_map>

namespace kiln {

namespace {

using nlohmann::json;

/// GPT-2's reversible byte -> printable code point map: printable Latin-1
/// bytes map to themselves, the other 68 to U+0100 onwards in byte order.
const std::array<UChar32, 256> &byteAlphabet() {
  static const std::array<UChar32, 256> map = [] {
    std::array<UChar32, 256> m{};
    int next = 256;
    for (int b = 0; b < 256; ++b) {
      bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      m[b] = printable ? b : next++;
    }
    return m;
  }();
  return map;
}

std::string toUtf8(UChar32 c) {
  char buf[U8_MAX_LENGTH];
  int32_t len = 0;
  U8_APPEND_UNSAFE(buf, len, c);
  return std::string(buf, len);
}

/// Throws unless `text` is well-formed UTF-8 (no overlongs, surrogates or
/// code points past U+10FFFF).
void checkUtf8(std::string_view text, const std::string &what) {
  int32_t i = 0, n = static_cast<int32_t>(text.size());
  while (i < n) {
    if (static_cast<unsigned char>(text[i]) < 0x80) {
      ++i;
      continue;
    }
    int32_t start = i;
    UChar32 c;
    U8_NEXT(text.data(), i, n, c);
    if (c < 0)
      fail("{}: invalid UTF-8 at byte offset {}", what, start);
  }
}

std::string nfc(std::string_view text) {
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2 *norm = icu::Normalizer2::getNFCInstance(status);
  icu::StringPiece piece(text.data(), static_cast<int32_t>(text.size()));
  if (U_SUCCESS(status) && norm->isNormalizedUTF8(piece, status) && U_SUCCESS(status))
    return std::string(text);
  std::string out;
  icu::StringByteSink<std::string> sink(&out);
  status = U_ZERO_ERROR;
  norm->normalizeUTF8(0, piece, sink, nullptr, status);
  if (U_FAILURE(status))
    fail("tokenizer: NFC normalization failed: {}", u_errorName(status));
  return out;
}

/// `s` without trailing (or leading) Unicode whitespace, as the lstrip
/// (rstrip) flag of an added token demands of its neighbour.
std::string_view trimEnd(std::string_view s) {
  int32_t end = static_cast<int32_t>(s.size());
  while (end > 0) {
    int32_t i = end;
    UChar32 c;
    U8_PREV(s.data(), 0, i, c);
    if (!u_isUWhiteSpace(c))
      break;
    end = i;
  }
  return s.substr(0, end);
}

std::string_view trimStart(std::string_view s) {
  int32_t i = 0, n = static_cast<int32_t>(s.size());
  while (i < n) {
    int32_t next = i;
    UChar32 c;
    U8_NEXT(s.data(), next, n, c);
    if (!u_isUWhiteSpace(c))
      break;
    i = next;
  }
  return s.substr(i);
}

/// FNV-1a, 64 bit: stable across platforms and runs, enough to key caches.
std::string fnv1a64(const std::string &bytes) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : bytes)
    h = (h ^ c) * 0x100000001b3ull;
  return fmt::format("{:016x}", h);
}

/// Reads fields of the tokenizer.json, naming file and dotted field path in
/// every error.
struct Schema {
  const std::string &file;

  static std::string join(const std::string &path, const std::string &key) {
    return path.empty() ? key : path + "." + key;
  }
  const json &field(const json &object, const std::string &path, const std::string &key,
                    json::value_t type) const {
    std::string name = join(path, key);
    auto it = object.find(key);
    if (it == object.end())
      fail("{}: missing field '{}'", file, name);
    bool ok =
        it->type() == type || (type == json::value_t::number_integer && it->is_number_integer());
    if (!ok)
      fail("{}: field '{}' must be {}, got {}", file, name, json(type).type_name(),
           it->dump().substr(0, 80));
    return *it;
  }
  std::string string(const json &object, const std::string &path, const std::string &key) const {
    return field(object, path, key, json::value_t::string).get<std::string>();
  }
  bool boolean(const json &object, const std::string &path, const std::string &key) const {
    return field(object, path, key, json::value_t::boolean).get<bool>();
  }
  void expect(const json &object, const std::string &path, const std::string &key,
              const json &want) const {
    const json &got = object.contains(key) ? object[key] : json();
    if (got != want)
      fail("{}: field '{}' must be {} (the only setting Kiln supports), got {}", file,
           join(path, key), want.dump(), got.dump());
  }
  /// Optional settings must be absent or have their neutral value.
  void neutral(const json &object, const std::string &path, const std::string &key,
               const json &want) const {
    if (object.contains(key) && !object[key].is_null())
      expect(object, path, key, want);
  }
};

struct AddedToken {
  std::string content;
  int32_t id;
  bool lstrip, rstrip, normalized;
};

/// A piece of input: either text to pre-tokenize or one added token.
struct Segment {
  std::string_view text;
  const AddedToken *token;
};

struct CodeDeleter {
  void operator()(pcre2_code *code) const { pcre2_code_free(code); }
};
struct MatchDataDeleter {
  void operator()(pcre2_match_data *data) const { pcre2_match_data_free(data); }
};
struct MatchContextDeleter {
  void operator()(pcre2_match_context *context) const { pcre2_match_context_free(context); }
};

} // namespace

struct Tokenizer::Impl {
  std::string path, hash;
  std::unordered_map<std::string, int32_t> vocab; // byte-alphabet text -> id
  /// (left id, right id) -> (rank, merged id), as HF's BPE keeps them.
  std::unordered_map<uint64_t, std::pair<int32_t, int32_t>> merges;
  std::array<int32_t, 256> byteIds{};
  bool ignoreMerges = false;
  int64_t mergeCount = 0;
  /// The bytes each id decodes to; `known` marks the ids that exist.
  std::vector<std::string> idBytes;
  std::vector<bool> known;
  /// Every id must be below this: the number of vocab entries plus added
  /// tokens. Ids index idBytes, so an id of 2^31 must be an error rather
  /// than a 2^31-entry table.
  int64_t idLimit = 0;
  std::vector<AddedToken> added; // longest content first
  /// startsAdded[normalized][b]: some added token of that kind starts with
  /// byte b; lets the scan for added tokens skip most positions at once.
  std::array<std::array<bool, 256>, 2> startsAdded{};
  std::unordered_map<std::string, int32_t> addedIds;
  std::unique_ptr<pcre2_code, CodeDeleter> regex;

  /// Pre-token bytes -> ids. Text repeats its words heavily, so most
  /// pre-tokens skip BPE entirely; bounded by clearing when full.
  static constexpr size_t kCacheEntries = 1 << 18, kCacheMaxBytes = 256;
  mutable std::mutex cacheMutex;
  mutable std::unordered_map<std::string, std::vector<int32_t>> cache;

  static uint64_t pairKey(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }

  void loadModel(const Schema &s, const json &root);
  void loadAddedTokens(const Schema &s, const json &root);
  void loadPattern(const Schema &s, const json &root);

  std::vector<Segment> splitAdded(std::string_view text, bool normalized) const;
  void encodeNormalized(std::string_view text, std::vector<int32_t> &out) const;
  void encodePreToken(std::string_view bytes, std::vector<int32_t> &out) const;
  std::string describeId(int32_t id) const;
  void bpe(std::string_view bytes, std::vector<int32_t> &out) const;
};

void Tokenizer::Impl::loadModel(const Schema &s, const json &root) {
  const json &model = s.field(root, "", "model", json::value_t::object);
  std::string type = s.string(model, "model", "type");
  if (type != "BPE")
    fail("{}: field 'model.type' must be \"BPE\", got \"{}\"", s.file, type);
  s.neutral(model, "model", "dropout", nullptr);
  s.neutral(model, "model", "byte_fallback", false);
  s.neutral(model, "model", "continuing_subword_prefix", "");
  s.neutral(model, "model", "end_of_word_suffix", "");
  if (model.contains("ignore_merges"))
    ignoreMerges = s.boolean(model, "model", "ignore_merges");

  const json &vocabJson = s.field(model, "model", "vocab", json::value_t::object);
  idLimit = static_cast<int64_t>(vocabJson.size() +
                                 s.field(root, "", "added_tokens", json::value_t::array).size());
  idBytes.reserve(idLimit);
  known.reserve(idLimit);
  // Byte-level tokens decode symbol by symbol through the inverse alphabet.
  const std::array<UChar32, 256> &alphabet = byteAlphabet();
  std::unordered_map<UChar32, char> toByte;
  for (int b = 0; b < 256; ++b)
    toByte[alphabet[b]] = static_cast<char>(b);
  vocab.reserve(vocabJson.size());
  for (const auto &[token, idJson] : vocabJson.items()) {
    int64_t id = idJson.is_number_integer() ? idJson.get<int64_t>() : -1;
    if (id < 0)
      fail("{}: field 'model.vocab' maps \"{}\" to {}, expected a non-negative id", s.file, token,
           idJson.dump());
    if (id >= idLimit)
      fail("{}: field 'model.vocab' maps \"{}\" to {}, but ids must be dense: below {}, the "
           "number of vocab and added tokens",
           s.file, token, id, idLimit);
    if (static_cast<size_t>(id) >= idBytes.size()) {
      idBytes.resize(id + 1);
      known.resize(id + 1);
    }
    if (known[id])
      fail("{}: field 'model.vocab' maps \"{}\" to {}, already the id of {}", s.file, token, id,
           describeId(id));
    std::string bytes;
    for (int32_t i = 0, n = static_cast<int32_t>(token.size()); i < n;) {
      UChar32 c;
      U8_NEXT(token.data(), i, n, c);
      auto b = toByte.find(c);
      if (b == toByte.end())
        fail("{}: field 'model.vocab' has \"{}\", which is not in the byte-level alphabet", s.file,
             token);
      bytes += b->second;
    }
    idBytes[id] = std::move(bytes);
    known[id] = true;
    vocab.emplace(token, static_cast<int32_t>(id));
  }
  for (int b = 0; b < 256; ++b) {
    auto it = vocab.find(toUtf8(alphabet[b]));
    if (it == vocab.end())
      fail("{}: field 'model.vocab' lacks the byte-level token for byte {}", s.file, b);
    byteIds[b] = it->second;
  }

  const json &mergesJson = s.field(model, "model", "merges", json::value_t::array);
  merges.reserve(mergesJson.size());
  for (size_t rank = 0; rank < mergesJson.size(); ++rank) {
    // Older files spell a merge "left right", newer ones ["left", "right"].
    const json &m = mergesJson[rank];
    std::string left, right;
    if (m.is_string()) {
      std::string text = m.get<std::string>();
      size_t space = text.find(' ');
      if (space != std::string::npos && text.find(' ', space + 1) == std::string::npos) {
        left = text.substr(0, space);
        right = text.substr(space + 1);
      }
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      left = m[0].get<std::string>();
      right = m[1].get<std::string>();
    }
    if (left.empty() || right.empty())
      fail("{}: field 'model.merges[{}]' must be \"left right\" or [left, right], got {}", s.file,
           rank, m.dump());
    auto a = vocab.find(left), b = vocab.find(right), merged = vocab.find(left + right);
    if (a == vocab.end() || b == vocab.end() || merged == vocab.end())
      fail("{}: field 'model.merges[{}]' ({}) uses a token missing from model.vocab", s.file, rank,
           m.dump());
    // A repeated pair takes its last rank, as HF's map construction does.
    merges.insert_or_assign(pairKey(a->second, b->second),
                            std::make_pair(static_cast<int32_t>(rank), merged->second));
  }
  mergeCount = static_cast<int64_t>(mergesJson.size());
}

void Tokenizer::Impl::loadAddedTokens(const Schema &s, const json &root) {
  const json &list = s.field(root, "", "added_tokens", json::value_t::array);
  for (size_t i = 0; i < list.size(); ++i) {
    std::string where = fmt::format("added_tokens[{}]", i);
    if (!list[i].is_object())
      fail("{}: field '{}' must be an object", s.file, where);
    const json &t = list[i];
    int64_t id = s.field(t, where, "id", json::value_t::number_integer).get<int64_t>();
    AddedToken token{s.string(t, where, "content"), static_cast<int32_t>(id),
                     s.boolean(t, where, "lstrip"), s.boolean(t, where, "rstrip"),
                     s.boolean(t, where, "normalized")};
    // single_word needs word-boundary rules Kiln does not implement.
    s.neutral(t, where, "single_word", false);
    if (token.content.empty() || id < 0)
      fail("{}: field '{}' needs a non-empty content and a non-negative id", s.file, where);
    if (id >= idLimit)
      fail("{}: field '{}.id' is {}, but ids must be dense: below {}, the number of vocab and "
           "added tokens",
           s.file, where, id, idLimit);
    checkUtf8(token.content, s.file + ": " + where + ".content");
    // A normalized token is looked for in normalized text, so normalize it too.
    if (token.normalized)
      token.content = nfc(token.content);
    if (!addedIds.emplace(token.content, token.id).second)
      fail("{}: field '{}' repeats the content \"{}\"", s.file, where, token.content);
    // An id may be shared only by the same text (a special token that is also
    // in the vocab); otherwise decode could not tell the two apart.
    if (static_cast<size_t>(token.id) < idBytes.size() && known[token.id] &&
        idBytes[token.id] != token.content)
      fail("{}: field '{}.id' gives \"{}\" the id {}, already the id of {}", s.file, where,
           token.content, token.id, describeId(token.id));
    if (static_cast<size_t>(token.id) >= idBytes.size()) {
      idBytes.resize(token.id + 1);
      known.resize(token.id + 1);
    }
    idBytes[token.id] = token.content;
    known[token.id] = true;
    startsAdded[token.normalized][static_cast<unsigned char>(token.content[0])] = true;
    added.push_back(std::move(token));
  }
  // Longest first, so that the first match found at a position is the longest.
  std::stable_sort(added.begin(), added.end(), [](const AddedToken &a, const AddedToken &b) {
    return a.content.size() > b.content.size();
  });
}

/// Names the token that already holds `id`, for load errors (a linear search,
/// so only on the error path).
std::string Tokenizer::Impl::describeId(int32_t id) const {
  for (const AddedToken &token : added)
    if (token.id == id)
      return fmt::format("added token \"{}\"", token.content);
  for (const auto &[token, tokenId] : vocab)
    if (tokenId == id)
      return fmt::format("model.vocab \"{}\"", token);
  return fmt::format("id {}", id);
}

void Tokenizer::Impl::loadPattern(const Schema &s, const json &root) {
  const json &normalizer = s.field(root, "", "normalizer", json::value_t::object);
  s.expect(normalizer, "normalizer", "type", "NFC");

  const json &pre = s.field(root, "", "pre_tokenizer", json::value_t::object);
  s.expect(pre, "pre_tokenizer", "type", "Sequence");
  const json &steps = s.field(pre, "pre_tokenizer", "pretokenizers", json::value_t::array);
  if (steps.size() != 2 || !steps[0].is_object() || !steps[1].is_object())
    fail("{}: field 'pre_tokenizer.pretokenizers' must be [Split, ByteLevel]", s.file);
  const std::string split = "pre_tokenizer.pretokenizers[0]";
  s.expect(steps[0], split, "type", "Split");
  s.expect(steps[0], split, "behavior", "Isolated");
  s.expect(steps[0], split, "invert", false);
  const json &pattern = s.field(steps[0], split, "pattern", json::value_t::object);
  std::string regexText = s.string(pattern, split + ".pattern", "Regex");
  const std::string byteLevel = "pre_tokenizer.pretokenizers[1]";
  s.expect(steps[1], byteLevel, "type", "ByteLevel");
  s.expect(steps[1], byteLevel, "add_prefix_space", false);
  s.expect(steps[1], byteLevel, "use_regex", false);

  const json &decoder = s.field(root, "", "decoder", json::value_t::object);
  s.expect(decoder, "decoder", "type", "ByteLevel");

  // These change the ids of an encoding: truncation drops ids, padding
  // appends pad ids, and post-processors such as TemplateProcessing add
  // special tokens. Qwen3 has none of them; its ByteLevel post-processor
  // only trims offsets, which Kiln does not produce.
  s.neutral(root, "", "truncation", nullptr);
  s.neutral(root, "", "padding", nullptr);
  if (root.contains("post_processor") && !root["post_processor"].is_null()) {
    const json &post = s.field(root, "", "post_processor", json::value_t::object);
    s.expect(post, "post_processor", "type", "ByteLevel");
  }

  int errorCode = 0;
  PCRE2_SIZE errorOffset = 0;
  regex.reset(pcre2_compile(reinterpret_cast<PCRE2_SPTR>(regexText.data()), regexText.size(),
                            PCRE2_UTF | PCRE2_UCP, &errorCode, &errorOffset, nullptr));
  if (!regex) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(errorCode, message, sizeof(message));
    fail("{}: field '{}.pattern.Regex' does not compile at offset {}: {}", s.file, split,
         errorOffset, reinterpret_cast<const char *>(message));
  }
  // JIT is an optimization only: pcre2_match uses it when it compiled and
  // interprets the pattern otherwise.
  (void)pcre2_jit_compile(regex.get(), PCRE2_JIT_COMPLETE);
}

std::vector<Segment> Tokenizer::Impl::splitAdded(std::string_view text, bool normalized) const {
  std::vector<Segment> segments;
  size_t gapStart = 0;
  const std::array<bool, 256> &starts = startsAdded[normalized];
  for (size_t pos = 0; pos < text.size();) {
    const AddedToken *match = nullptr;
    if (starts[static_cast<unsigned char>(text[pos])]) {
      for (const AddedToken &token : added)
        if (token.normalized == normalized &&
            text.compare(pos, token.content.size(), token.content) == 0) {
          match = &token;
          break;
        }
    }
    if (!match) {
      ++pos;
      continue;
    }
    segments.push_back({text.substr(gapStart, pos - gapStart), nullptr});
    segments.push_back({match->content, match});
    pos += match->content.size();
    gapStart = pos;
  }
  segments.push_back({text.substr(gapStart), nullptr});
  // lstrip/rstrip: the token swallows the whitespace next to it.
  for (size_t i = 0; i < segments.size(); ++i)
    if (const AddedToken *token = segments[i].token) {
      if (token->lstrip)
        segments[i - 1].text = trimEnd(segments[i - 1].text);
      if (token->rstrip)
        segments[i + 1].text = trimStart(segments[i + 1].text);
    }
  return segments;
}

void Tokenizer::Impl::encodeNormalized(std::string_view text, std::vector<int32_t> &out) const {
  std::unique_ptr<pcre2_match_data, MatchDataDeleter> match(
      pcre2_match_data_create_from_pattern(regex.get(), nullptr));
  // PCRE2 gives up on a match after 10M backtracking steps by default, and
  // Qwen's `\s*[\r\n]+` backtracks one step per character of a whitespace run
  // looking for a newline, so 10M spaces failed. That work is linear in the
  // text: allowing the default plus 4 steps per byte lets any input through,
  // split exactly as the regex splits it, and still stops a runaway pattern.
  std::unique_ptr<pcre2_match_context, MatchContextDeleter> context(
      pcre2_match_context_create(nullptr));
  if (!context)
    throw std::bad_alloc();
  uint64_t limit = std::min<uint64_t>(10'000'000 + 4 * static_cast<uint64_t>(text.size()),
                                      UINT32_MAX);
  pcre2_set_match_limit(context.get(), static_cast<uint32_t>(limit));
  auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t gapStart = 0, pos = 0;
  while (pos < text.size()) {
    int rc = pcre2_match(regex.get(), subject, text.size(), pos, PCRE2_NO_UTF_CHECK, match.get(),
                         context.get());
    if (rc == PCRE2_ERROR_NOMATCH)
      break;
    if (rc < 0) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(rc, message, sizeof(message));
      fail("{}: pre-tokenizer regex failed: {}", path, reinterpret_cast<const char *>(message));
    }
    const PCRE2_SIZE *ovector = pcre2_get_ovector_pointer(match.get());
    size_t start = ovector[0], end = ovector[1];
    if (start == end) {
      // An empty match consumes nothing: step over one character, which
      // stays in the gap (HF and transformers.js drop empty pieces too).
      pos = start + 1;
      while (pos < text.size() && U8_IS_TRAIL(text[pos]))
        ++pos;
      continue;
    }
    // "Isolated": unmatched text between matches is a pre-token as well.
    if (start > gapStart)
      encodePreToken(text.substr(gapStart, start - gapStart), out);
    encodePreToken(text.substr(start, end - start), out);
    gapStart = pos = end;
  }
  if (gapStart < text.size())
    encodePreToken(text.substr(gapStart), out);
}

void Tokenizer::Impl::encodePreToken(std::string_view bytes, std::vector<int32_t> &out) const {
  if (bytes.size() > kCacheMaxBytes)
    return bpe(bytes, out);
  std::string key(bytes);
  {
    std::lock_guard<std::mutex> lock(cacheMutex);
    auto it = cache.find(key);
    if (it != cache.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  size_t first = out.size();
  bpe(bytes, out);
  std::lock_guard<std::mutex> lock(cacheMutex);
  if (cache.size() >= kCacheEntries)
    cache.clear();
  cache.emplace(std::move(key), std::vector<int32_t>(out.begin() + first, out.end()));
}

void Tokenizer::Impl::bpe(std::string_view bytes, std::vector<int32_t> &out) const {
  if (ignoreMerges) {
    std::string symbols;
    for (unsigned char b : bytes)
      symbols += toUtf8(byteAlphabet()[b]);
    if (auto it = vocab.find(symbols); it != vocab.end())
      return out.push_back(it->second);
  }
  // Symbols form a linked list; a heap holds candidate merges ordered by
  // (rank, position) as in HF's Word::merge_all. Entries go stale when a
  // neighbour merges first, and are skipped when popped.
  struct Symbol {
    int32_t id, prev, next;
    bool live;
  };
  int32_t n = static_cast<int32_t>(bytes.size());
  std::vector<Symbol> symbols(n);
  for (int32_t i = 0; i < n; ++i)
    symbols[i] = {byteIds[static_cast<unsigned char>(bytes[i])], i - 1, i + 1 < n ? i + 1 : -1,
                  true};
  using Candidate = std::tuple<int32_t, int32_t, int32_t>; // rank, position, merged id
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> heap;
  auto consider = [&](int32_t pos) {
    int32_t next = symbols[pos].next;
    if (next < 0)
      return;
    auto it = merges.find(pairKey(symbols[pos].id, symbols[next].id));
    if (it != merges.end())
      heap.emplace(it->second.first, pos, it->second.second);
  };
  for (int32_t i = 0; i + 1 < n; ++i)
    consider(i);
  while (!heap.empty()) {
    auto [rank, pos, mergedId] = heap.top();
    heap.pop();
    Symbol &left = symbols[pos];
    if (!left.live || left.next < 0)
      continue;
    Symbol &right = symbols[left.next];
    auto it = merges.find(pairKey(left.id, right.id));
    if (it == merges.end() || it->second.second != mergedId)
      continue;
    left.id = mergedId;
    right.live = false;
    left.next = right.next;
    if (right.next >= 0)
      symbols[right.next].prev = pos;
    if (left.prev >= 0)
      consider(left.prev);
    consider(pos);
  }
  for (int32_t i = n ? 0 : -1; i >= 0; i = symbols[i].next)
    out.push_back(symbols[i].id);
}

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::~Tokenizer() = default;

std::unique_ptr<Tokenizer> Tokenizer::load(const std::string &path) {
  std::string bytes = readFile(path);
  json root = parseJson(bytes, path);
  if (!root.is_object())
    fail("{}: expected a JSON object at the top level", path);
  auto impl = std::make_unique<Impl>();
  impl->path = path;
  impl->hash = fnv1a64(bytes);
  Schema schema{path};
  impl->loadModel(schema, root);
  impl->loadAddedTokens(schema, root);
  impl->loadPattern(schema, root);
  return std::unique_ptr<Tokenizer>(new Tokenizer(std::move(impl)));
}

std::vector<int32_t> Tokenizer::encode(std::string_view text) const {
  checkUtf8(text, "tokenizer: encode");
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3);
  // Tokens with normalized=false (all of Qwen3's) match the raw text; those
  // with normalized=true match after NFC, as in HF's AddedVocabulary.
  for (const Segment &raw : impl_->splitAdded(text, false)) {
    if (raw.token) {
      ids.push_back(raw.token->id);
      continue;
    }
    std::string normalized = nfc(raw.text);
    for (const Segment &piece : impl_->splitAdded(normalized, true)) {
      if (piece.token)
        ids.push_back(piece.token->id);
      else if (!piece.text.empty())
        impl_->encodeNormalized(piece.text, ids);
    }
  }
  return ids;
}

std::string Tokenizer::decode(const std::vector<int32_t> &ids) const {
  std::string text;
  for (int32_t id : ids) {
    if (id < 0 || static_cast<size_t>(id) >= impl_->known.size() || !impl_->known[id])
      fail("{}: cannot decode unknown token id {} (ids are 0..{})", impl_->path, id,
           impl_->known.size() - 1);
    text += impl_->idBytes[id];
  }
  return text;
}

int64_t Tokenizer::vocabSize() const { return static_cast<int64_t>(impl_->known.size()); }
int64_t Tokenizer::mergeCount() const { return impl_->mergeCount; }
int64_t Tokenizer::addedTokenCount() const { return static_cast<int64_t>(impl_->added.size()); }

int32_t Tokenizer::specialTokenId(const std::string &content) const {
  auto it = impl_->addedIds.find(content);
  if (it == impl_->addedIds.end())
    fail("{}: no added token \"{}\"", impl_->path, content);
  return it->second;
}

const std::string &Tokenizer::contentHash() const { return impl_->hash; }

} // namespace kiln
