// Byte-level text corpora for the GPT examples: every byte of the file is one
// token, so the vocabulary is the 256 byte values.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace stringrt {

constexpr int kByteVocabSize = 256;

// Larger files are rejected (each byte becomes a 4-byte token in memory).
constexpr uint64_t kMaxTextCorpusBytes = uint64_t(256) << 20;

struct TextCorpus {
  std::vector<int32_t> tokens; // Each in [0, kByteVocabSize).
};

// Reads a text file as byte tokens. Throws an Error naming the file if it is
// missing, unreadable, empty, larger than kMaxTextCorpusBytes, or shorter than
// minTokens (e.g. one context window plus the next-token target).
TextCorpus loadTextCorpus(const std::string &path, size_t minTokens);

// Deterministic contiguous split: the first tokens are the train split, the
// last floor(size * testFraction) the test split. testFraction must be in
// [0, 1); a positive fraction that would leave the test split empty throws.
std::pair<std::vector<int32_t>, std::vector<int32_t>>
splitTrainTest(const TextCorpus &corpus, double testFraction);

} // namespace stringrt
