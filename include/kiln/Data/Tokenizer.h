//===- Tokenizer.h - Qwen3's byte-level BPE tokenizer -----------*- C++ -*-===//
//
// A Hugging Face `tokenizer.json` (the Qwen3 one) interpreted in C++:
// NFC normalization (ICU), added/special tokens matched before
// pre-tokenization, the Split pre-tokenizer with Qwen's regex (PCRE2, UTF-8,
// Unicode classes), the GPT-2 byte-to-unicode ByteLevel mapping, and BPE
// merges applied by rank, with a cache of merged pieces.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_DATA_TOKENIZER_H
#define KILN_DATA_TOKENIZER_H

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace kiln {

class Tokenizer {
public:
  /// Loads and validates `path` (a tokenizer.json); throws kiln::Error
  /// naming the file and the field on anything unexpected.
  static std::unique_ptr<Tokenizer> load(const std::string &path);
  ~Tokenizer();

  /// Token ids of `text` (any valid UTF-8; invalid UTF-8 is an error).
  std::vector<int32_t> encode(std::string_view text) const;
  /// The text of `ids` (special tokens included verbatim); an unknown id is
  /// an error.
  std::string decode(const std::vector<int32_t> &ids) const;

  /// Size of the id space (base vocabulary + added tokens), e.g. 151669.
  int64_t vocabSize() const;
  /// Number of BPE merges and added tokens, for validation.
  int64_t mergeCount() const;
  int64_t addedTokenCount() const;
  /// The id of an added token such as "<|endoftext|>"; throws if absent.
  int32_t specialTokenId(const std::string &content) const;
  /// A stable hash of the tokenizer file's contents (for data caches).
  const std::string &contentHash() const;

  struct Impl;

private:
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

} // namespace kiln

#endif // KILN_DATA_TOKENIZER_H
