// Gzip decompression of data files: corrupt, truncated and oversized input.
#include "data/Gzip.h"

#include "TestFiles.h"

#include <gtest/gtest.h>

namespace stringrt::detail {
namespace {

using test::failsWith;
using test::gzipBytes;

std::vector<uint8_t> toVector(const std::string &bytes) {
  return std::vector<uint8_t>(bytes.begin(), bytes.end());
}

std::string toString(const std::vector<uint8_t> &bytes) {
  return std::string(bytes.begin(), bytes.end());
}

std::string sampleData() {
  std::string data;
  for (uint64_t i = 0; i < 300000; ++i)
    data += static_cast<char>(i * 7919 % 251);
  return data;
}

TEST(GzipTest, DetectsTheMagic) {
  EXPECT_TRUE(isGzip(toVector(gzipBytes("x"))));
  EXPECT_FALSE(isGzip(toVector("\x1f")));
  EXPECT_FALSE(isGzip(toVector(std::string("\0\0\x08\x03", 4))));
  EXPECT_FALSE(isGzip({}));
}

TEST(GzipTest, RoundTrips) {
  std::string data = sampleData();
  EXPECT_EQ(toString(gunzip("f.gz", toVector(gzipBytes(data)), 1 << 20)), data);
  EXPECT_EQ(toString(gunzip("f.gz", toVector(gzipBytes("")), 1 << 20)), "");
}

TEST(GzipTest, ConcatenatedMembersAreJoined) {
  EXPECT_EQ(toString(gunzip("f.gz",
                            toVector(gzipBytes("hello, ") + gzipBytes("world")),
                            100)),
            "hello, world");
}

TEST(GzipTest, TruncatedDataIsAnError) {
  std::string compressed = gzipBytes(sampleData());
  for (size_t keep :
       {size_t(2), size_t(10), compressed.size() / 2, compressed.size() - 1})
    EXPECT_TRUE(failsWith(
        [&] { gunzip("f.gz", toVector(compressed.substr(0, keep)), 1 << 20); },
        "f.gz", {"gzip data is truncated"}))
        << "keeping " << keep << " bytes";
}

TEST(GzipTest, CorruptDataIsAnError) {
  std::string compressed = gzipBytes(sampleData());
  compressed[compressed.size() - 5] ^= 0x55; // In the CRC-32/length trailer.
  EXPECT_TRUE(failsWith([&] { gunzip("f.gz", toVector(compressed), 1 << 20); },
                        "f.gz", {"gzip data is corrupt"}));
  std::string badMethod = gzipBytes("abc");
  badMethod[2] = 7; // Compression method other than deflate.
  EXPECT_TRUE(failsWith([&] { gunzip("f.gz", toVector(badMethod), 100); },
                        "f.gz", {"gzip data is corrupt"}));
}

TEST(GzipTest, TrailingGarbageIsAnError) {
  EXPECT_TRUE(failsWith(
      [&] { gunzip("f.gz", toVector(gzipBytes("abc") + "garbage"), 100); },
      "f.gz", {"gzip data is corrupt"}));
}

TEST(GzipTest, OutputIsCapped) {
  std::string zeros(100000, '\0');
  std::vector<uint8_t> compressed = toVector(gzipBytes(zeros));
  EXPECT_LT(compressed.size(), 1000u);
  EXPECT_EQ(gunzip("f.gz", compressed, 100000).size(), 100000u);
  EXPECT_TRUE(failsWith([&] { gunzip("f.gz", compressed, 99999); }, "f.gz",
                        {"decompresses to more than the 99999-byte limit"}));
}

} // namespace
} // namespace stringrt::detail
