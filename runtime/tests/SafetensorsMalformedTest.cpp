// Every malformed safetensors file is rejected with an error naming the file
// and the problem.
#include "stringrt/Safetensors.h"

#include "TestFiles.h"

#include <gtest/gtest.h>

#include <sys/stat.h>

namespace stringrt {
namespace {

using test::failsWith;
using test::littleEndian;
using test::safetensorsBytes;
using test::TempDir;
using test::writeFile;

struct MalformedCase {
  std::string name;     // Test name suffix.
  std::string contents; // The whole file.
  std::vector<std::string> fragments;
};

// gtest prints parameters in failure messages; the name says which case.
void PrintTo(const MalformedCase &c, std::ostream *out) { *out << c.name; }

// A file whose data section has `dataSize` zero bytes after `header`.
std::string withData(const std::string &header, size_t dataSize) {
  return safetensorsBytes(header, std::string(dataSize, '\0'));
}

std::string entry(const std::string &name, const std::string &body) {
  return "\"" + name + "\":{" + body + "}";
}

// A header with the single tensor "w" described by `body`.
std::string oneTensor(const std::string &body, size_t dataSize) {
  return withData("{" + entry("w", body) + "}", dataSize);
}

const std::string kGood = R"("dtype":"F32","shape":[2],"data_offsets":[0,8])";

std::vector<MalformedCase> malformedCases() {
  return {
      {"EmptyFile",
       "",
       {"file is 0 bytes, too short for the 8-byte header length"}},
      {"TruncatedHeaderLength",
       std::string("\x10\x00\x00", 3),
       {"file is 3 bytes, too short for the 8-byte header length"}},
      {"HeaderLengthBeyondFile",
       littleEndian(64) + "{}",
       {"header length 64 runs past the end of the file (10 bytes)"}},
      {"HeaderLengthOverLimit",
       littleEndian(100'000'001) + "{}",
       {"header length 100000001 exceeds the limit"}},
      {"HeaderLengthAllOnes",
       littleEndian(~uint64_t(0)) + "{}",
       {"header length 18446744073709551615 exceeds"}},
      {"EmptyHeader",
       withData("", 0),
       {"header is not valid JSON", "unexpected end of input"}},
      {"InvalidJson",
       withData("{\"a\":", 0),
       {"header is not valid JSON (at byte 5 of the header)"}},
      {"TrailingGarbage",
       withData("{} x", 0),
       {"header is not valid JSON", "unexpected 'x' after the JSON value"}},
      {"NulPadding",
       withData(std::string("{}\0\0\0\0\0\0", 8), 0),
       {"header is not valid JSON", "byte 0x00"}},
      {"InvalidUtf8Name",
       withData("{\"\xFF\":{}}", 0),
       {"header is not valid JSON", "invalid UTF-8"}},
      {"HeaderIsArray",
       withData("[]", 0),
       {"header must be a JSON object, got array"}},
      {"DeepNesting",
       withData(std::string(200, '['), 0),
       {"nest deeper than 64 levels"}},
      {"EntryNotObject",
       withData("{\"w\":[1]}", 0),
       {"tensor \"w\": entry must be an object, got array"}},
      {"UnknownDType",
       oneTensor(R"("dtype":"F17","shape":[2],"data_offsets":[0,8])", 8),
       {"tensor \"w\": unsupported dtype \"F17\""}},
      {"LowercaseDType",
       oneTensor(R"("dtype":"f32","shape":[2],"data_offsets":[0,8])", 8),
       {"tensor \"w\": unsupported dtype \"f32\""}},
      {"DTypeNotString",
       oneTensor(R"("dtype":4,"shape":[2],"data_offsets":[0,8])", 8),
       {"tensor \"w\": dtype must be a string, got number"}},
      {"MissingDType",
       oneTensor(R"("shape":[2],"data_offsets":[0,8])", 8),
       {"tensor \"w\": missing \"dtype\""}},
      {"MissingShape",
       oneTensor(R"("dtype":"F32","data_offsets":[0,8])", 8),
       {"tensor \"w\": missing \"shape\""}},
      {"MissingOffsets",
       oneTensor(R"("dtype":"F32","shape":[2])", 8),
       {"tensor \"w\": missing \"data_offsets\""}},
      {"UnknownKey",
       oneTensor(kGood + R"(,"strides":[1])", 8),
       {"tensor \"w\": unexpected key \"strides\""}},
      {"RepeatedKey",
       oneTensor(kGood + R"(,"dtype":"F32")", 8),
       {"tensor \"w\": key \"dtype\" appears twice"}},
      {"ShapeNotArray",
       oneTensor(R"("dtype":"F32","shape":2,"data_offsets":[0,8])", 8),
       {"tensor \"w\": shape must be an array, got number"}},
      {"NegativeDim",
       oneTensor(R"("dtype":"F32","shape":[2,-2],"data_offsets":[0,8])", 8),
       {"tensor \"w\": shape dimension 1 is negative (-2)"}},
      {"FractionalDim",
       oneTensor(R"("dtype":"F32","shape":[2.5],"data_offsets":[0,8])", 8),
       {"tensor \"w\": shape dimension 0 must be an integer", "got 2.5"}},
      {"StringDim",
       oneTensor(R"("dtype":"F32","shape":["2"],"data_offsets":[0,8])", 8),
       {"shape dimension 0 must be an integer", "got string"}},
      {"HugeDim",
       oneTensor(R"("dtype":"F32","shape":[1e30],"data_offsets":[0,8])", 8),
       {"shape dimension 0 must be an integer", "got 1e30"}},
      {"ShapeOverflow",
       oneTensor(
           R"("dtype":"U8","shape":[4294967296,4294967296],"data_offsets":[0,8])",
           8),
       {"tensor \"w\": shape [4294967296, 4294967296] has too many elements"}},
      {"OffsetsWrongCount",
       oneTensor(R"("dtype":"F32","shape":[2],"data_offsets":[0])", 8),
       {"tensor \"w\": data_offsets must have 2 elements [begin, end], got 1"}},
      {"OffsetsNegative",
       oneTensor(R"("dtype":"F32","shape":[2],"data_offsets":[-8,0])", 8),
       {"tensor \"w\": data_offsets must be non-negative integers"}},
      {"OffsetsReversed",
       oneTensor(R"("dtype":"F32","shape":[2],"data_offsets":[8,0])", 8),
       {"tensor \"w\": data_offsets [8, 0] end before they begin"}},
      {"OffsetsOutOfRange",
       oneTensor(R"("dtype":"F32","shape":[2],"data_offsets":[0,8])", 4),
       {"tensor \"w\": data_offsets [0, 8] run past the end of the data "
        "section (4 bytes)"}},
      {"OffsetsBeyond64Bits",
       oneTensor(
           R"("dtype":"F32","shape":[2],"data_offsets":[0,18446744073709551616])",
           8),
       {"tensor \"w\": data_offsets must be non-negative integers that fit in "
        "64 bits"}},
      {"SizeMismatch",
       oneTensor(R"("dtype":"F32","shape":[3],"data_offsets":[0,8])", 8),
       {"tensor \"w\": data_offsets [0, 8] span 8 bytes but F32 [3] needs 3 "
        "elements of 4 bytes"}},
      {"Overlap",
       withData(
           "{" +
               entry("a", R"("dtype":"F32","shape":[2],"data_offsets":[0,8])") +
               "," +
               entry("b",
                     R"("dtype":"F32","shape":[2],"data_offsets":[4,12])") +
               "}",
           12),
       {"tensors \"a\" [0, 8) and \"b\" [4, 12) overlap"}},
      {"SameRange",
       withData("{" + entry("a", kGood) + "," + entry("b", kGood) + "}", 8),
       {"\"a\" [0, 8) and \"b\" [0, 8) overlap"}},
      {"Gap",
       withData(
           "{" +
               entry("a", R"("dtype":"F32","shape":[2],"data_offsets":[0,8])") +
               "," +
               entry("b",
                     R"("dtype":"F32","shape":[2],"data_offsets":[12,20])") +
               "}",
           20),
       {"bytes [8, 12) of the data section belong to no tensor"}},
      {"TrailingData",
       oneTensor(kGood, 12),
       {"bytes [8, 12) at the end of the data section belong to no tensor"}},
      {"DataWithoutTensors",
       withData("{}", 4),
       {"bytes [0, 4) at the end of the data section belong to no tensor"}},
      {"DuplicateTensor",
       withData("{" + entry("w", kGood) + "," + entry("w", kGood) + "}", 8),
       {"tensor \"w\" appears twice in the header"}},
      {"MetadataNotObject",
       withData(R"({"__metadata__":["a"]})", 0),
       {"__metadata__ must be an object of strings, got array"}},
      {"MetadataValueNotString",
       withData(R"({"__metadata__":{"step":12}})", 0),
       {"__metadata__ value for \"step\" must be a string, got number"}},
      {"MetadataDuplicateKey",
       withData(R"({"__metadata__":{"a":"1","a":"2"}})", 0),
       {"__metadata__ key \"a\" appears twice"}},
      {"MetadataTwice",
       withData(R"({"__metadata__":{},"__metadata__":{}})", 0),
       {"\"__metadata__\" appears twice in the header"}},
      {"ControlCharacterInName",
       withData("{\"a\\nb\":[]}", 0),
       {"tensor \"a\\nb\": entry must be an object"}},
  };
}

class SafetensorsMalformedTest
    : public ::testing::TestWithParam<MalformedCase> {};

TEST_P(SafetensorsMalformedTest, IsRejected) {
  TempDir dir;
  std::string path = dir.file("bad.safetensors");
  writeFile(path, GetParam().contents);
  EXPECT_TRUE(failsWith([&] { SafetensorsFile::open(path); }, path,
                        GetParam().fragments));
}

INSTANTIATE_TEST_SUITE_P(
    Header, SafetensorsMalformedTest, ::testing::ValuesIn(malformedCases()),
    [](const ::testing::TestParamInfo<MalformedCase> &info) {
      return info.param.name;
    });

TEST(SafetensorsOpenTest, MissingFile) {
  TempDir dir;
  std::string path = dir.file("absent.safetensors");
  EXPECT_TRUE(
      failsWith([&] { SafetensorsFile::open(path); }, path, {"no such file"}));
}

TEST(SafetensorsOpenTest, Directory) {
  TempDir dir;
  std::string path = dir.path().string();
  EXPECT_TRUE(failsWith([&] { SafetensorsFile::open(path); }, path,
                        {"is a directory, not a file"}));
}

TEST(SafetensorsOpenTest, FifoIsRejectedWithoutBlocking) {
  TempDir dir;
  std::string path = dir.file("fifo");
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  EXPECT_TRUE(failsWith([&] { SafetensorsFile::open(path); }, path,
                        {"is not a regular file"}));
}

} // namespace
} // namespace stringrt
