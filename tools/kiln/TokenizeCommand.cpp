//===- TokenizeCommand.cpp - kiln tokenize --------------------------------===//
//
//   kiln tokenize --tokenizer <tokenizer.json> [--decode] [--input <file> | <file>]
//
// Reads text (or, with --decode, whitespace-separated token ids) from the
// file or from stdin. Encoding prints the ids space-separated on one line;
// decoding prints the text exactly, without adding a newline.
//
//===----------------------------------------------------------------------===//

#include "Commands.h"
#include "kiln/Data/Tokenizer.h"
#include "kiln/Support/CommandLine.h"
#include "kiln/Support/Error.h"
#include "kiln/Support/Json.h"

#include <fmt/format.h>

#include <charconv>
#include <cstdio>
#include <iostream>
#include <set>
#include <sstream>

namespace kiln {

int runTokenize(const std::vector<std::string> &args) {
  // OptionList has no positional arguments: pull out the one optional input
  // file (a word that is neither an option nor an option's value) first.
  const std::set<std::string> flags = {"decode"};
  std::vector<std::string> optionArgs;
  std::optional<std::string> positional;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string &word = args[i];
    bool isOption = word.size() > 1 && word[0] == '-';
    if (!isOption && !positional) {
      positional = word;
      continue;
    }
    optionArgs.push_back(word);
    std::string name = word.substr(word.rfind("--", 0) == 0 ? 2 : 1);
    if (isOption && name.find('=') == std::string::npos && !flags.count(name) &&
        i + 1 < args.size())
      optionArgs.push_back(args[++i]);
  }
  OptionList options("tokenize", optionArgs, flags);
  std::string tokenizerPath = options.required("tokenizer");
  bool decode = options.flag("decode");
  std::optional<std::string> input = options.value("input");
  options.finish();
  if (input && positional)
    fail("tokenize: give the input either as --input or as a file argument, not both");
  if (positional)
    input = positional;

  std::string text;
  if (input && *input != "-") {
    text = readFile(*input);
  } else {
    std::ostringstream in;
    in << std::cin.rdbuf();
    text = in.str();
  }
  std::string source = input ? *input : "stdin";
  auto tokenizer = Tokenizer::load(tokenizerPath);

  if (!decode) {
    std::vector<int32_t> ids;
    try {
      ids = tokenizer->encode(text);
    } catch (const Error &e) {
      fail("{}: {}", source, e.what());
    }
    fmt::print("{}\n", fmt::join(ids, " "));
    return 0;
  }
  std::vector<int32_t> ids;
  std::istringstream words(text);
  for (std::string word; words >> word;) {
    int32_t id = 0;
    auto [end, ec] = std::from_chars(word.data(), word.data() + word.size(), id);
    if (ec != std::errc() || end != word.data() + word.size())
      fail("tokenize: {}: '{}' is not a token id (--decode reads whitespace-separated integers)",
           source, word);
    ids.push_back(id);
  }
  std::string decoded = tokenizer->decode(ids);
  std::fwrite(decoded.data(), 1, decoded.size(), stdout);
  return 0;
}

} // namespace kiln
