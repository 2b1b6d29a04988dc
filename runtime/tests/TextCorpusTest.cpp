// Byte-level text corpora and their train/test split.
#include "stringrt/TextCorpus.h"

#include "TestFiles.h"

#include <gtest/gtest.h>

#include <cmath>

namespace stringrt {
namespace {

using test::failsWith;
using test::TempDir;
using test::writeFile;

TEST(TextCorpusTest, EveryByteIsAToken) {
  TempDir dir;
  std::string path = dir.file("corpus.txt");
  writeFile(path, std::string("ab\n\0\xC3\xA9\xFF", 7));
  TextCorpus corpus = loadTextCorpus(path, 7);
  EXPECT_EQ(corpus.tokens,
            (std::vector<int32_t>{'a', 'b', '\n', 0, 0xC3, 0xA9, 0xFF}));
}

TEST(TextCorpusTest, MissingFile) {
  TempDir dir;
  std::string path = dir.file("absent.txt");
  EXPECT_TRUE(
      failsWith([&] { loadTextCorpus(path, 1); }, path, {"no such file"}));
}

TEST(TextCorpusTest, Directory) {
  TempDir dir;
  std::string path = dir.path().string();
  EXPECT_TRUE(
      failsWith([&] { loadTextCorpus(path, 1); }, path, {"is a directory"}));
}

TEST(TextCorpusTest, EmptyFile) {
  TempDir dir;
  std::string path = dir.file("empty.txt");
  writeFile(path, "");
  EXPECT_TRUE(failsWith([&] { loadTextCorpus(path, 0); }, path,
                        {"text corpus is empty"}));
}

TEST(TextCorpusTest, TooShortForOneContextWindow) {
  TempDir dir;
  std::string path = dir.file("short.txt");
  writeFile(path, "hello");
  EXPECT_NO_THROW(loadTextCorpus(path, 5));
  EXPECT_TRUE(failsWith(
      [&] { loadTextCorpus(path, 6); }, path,
      {"text corpus has 5 tokens (bytes) but one context window needs 6"}));
}

TEST(TextCorpusTest, TooLarge) {
  TempDir dir;
  std::string path = dir.file("huge.txt");
  writeFile(path, "");
  std::filesystem::resize_file(path, kMaxTextCorpusBytes +
                                         1); // Sparse: takes no disk space.
  EXPECT_TRUE(failsWith([&] { loadTextCorpus(path, 1); }, path,
                        {"is 268435457 bytes, over the 268435456-byte limit"}));
}

TextCorpus countingCorpus(int size) {
  TextCorpus corpus;
  for (int i = 0; i < size; ++i)
    corpus.tokens.push_back(i % 256);
  return corpus;
}

TEST(TextCorpusTest, SplitKeepsTheLastFractionForTesting) {
  TextCorpus corpus = countingCorpus(1000);
  auto [train, test] = splitTrainTest(corpus, 0.1);
  ASSERT_EQ(train.size(), 900u);
  ASSERT_EQ(test.size(), 100u);
  EXPECT_EQ(train, std::vector<int32_t>(corpus.tokens.begin(),
                                        corpus.tokens.begin() + 900));
  EXPECT_EQ(test, std::vector<int32_t>(corpus.tokens.begin() + 900,
                                       corpus.tokens.end()));
  EXPECT_EQ(splitTrainTest(corpus, 0.1), splitTrainTest(corpus, 0.1));
  EXPECT_EQ(splitTrainTest(countingCorpus(10), 0.25).second.size(),
            2u); // Rounds down.
}

TEST(TextCorpusTest, SplitWithZeroFractionHasNoTestTokens) {
  auto [train, test] = splitTrainTest(countingCorpus(10), 0.0);
  EXPECT_EQ(train.size(), 10u);
  EXPECT_TRUE(test.empty());
}

TEST(TextCorpusTest, SplitRejectsInvalidFractions) {
  TextCorpus corpus = countingCorpus(100);
  for (double fraction : {-0.1, 1.0, 1.5, std::nan("")})
    EXPECT_TRUE(failsWith([&] { splitTrainTest(corpus, fraction); }, "",
                          {"testFraction must be in [0, 1)"}))
        << fraction;
  EXPECT_TRUE(failsWith([&] { splitTrainTest(corpus, 0.001); }, "",
                        {"leaves the test split empty"}));
}

} // namespace
} // namespace stringrt
