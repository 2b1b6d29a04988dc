#include "stringrt/TextCorpus.h"

#include "format/InputFile.h"
#include "stringrt/Error.h"

#include <fmt/format.h>

namespace stringrt {

TextCorpus loadTextCorpus(const std::string &path, size_t minTokens) {
  std::vector<uint8_t> bytes =
      detail::InputFile(path).readAll(kMaxTextCorpusBytes, "text corpora");
  if (bytes.empty())
    throw Error(path, "text corpus is empty");
  if (bytes.size() < minTokens)
    throw Error(
        path,
        fmt::format(
            "text corpus has {} tokens (bytes) but one context window needs {}",
            bytes.size(), minTokens));
  TextCorpus corpus;
  corpus.tokens.assign(bytes.begin(), bytes.end());
  return corpus;
}

std::pair<std::vector<int32_t>, std::vector<int32_t>>
splitTrainTest(const TextCorpus &corpus, double testFraction) {
  // Written so that NaN fails too.
  if (!(testFraction >= 0.0 && testFraction < 1.0))
    throw Error(
        fmt::format("splitTrainTest: testFraction must be in [0, 1), got {}",
                    testFraction));
  const std::vector<int32_t> &tokens = corpus.tokens;
  size_t testCount =
      static_cast<size_t>(static_cast<double>(tokens.size()) * testFraction);
  if (testFraction > 0.0 && testCount == 0)
    throw Error(fmt::format("splitTrainTest: a test fraction of {} of {} "
                            "tokens leaves the test split empty",
                            testFraction, tokens.size()));
  if (!tokens.empty() && testCount >= tokens.size())
    throw Error(fmt::format("splitTrainTest: a test fraction of {} of {} "
                            "tokens leaves the train split empty",
                            testFraction, tokens.size()));
  auto middle = tokens.end() - static_cast<std::ptrdiff_t>(testCount);
  return {std::vector<int32_t>(tokens.begin(), middle),
          std::vector<int32_t>(middle, tokens.end())};
}

} // namespace stringrt
