// Writing and reading well-formed safetensors files.
#include "stringrt/Safetensors.h"

#include "TestFiles.h"
#include "stringrt/Error.h"

#include <gtest/gtest.h>

#include <cstring>

namespace stringrt {
namespace {

using test::bytesOf;
using test::failsWith;
using test::readFile;
using test::safetensorsBytes;
using test::TempDir;
using test::writeFile;

struct OwnedTensor {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  std::string bytes;
};

std::vector<OwnedTensor> sampleTensors() {
  return {
      {"weight",
       DType::F32,
       {2, 3},
       bytesOf(std::vector<float>{1.5f, -2.f, 3.25f, 0.f, -0.f, 1e30f})},
      {"scalar", DType::F32, {}, bytesOf(std::vector<float>{3.5f})},
      {"empty", DType::F32, {0, 3}, ""},
      {"double",
       DType::F64,
       {4},
       bytesOf(std::vector<double>{1.0, -1e300, 2.5, 1e-300})},
      {"half",
       DType::F16,
       {3, 1},
       bytesOf(std::vector<uint16_t>{0x3c00, 0xc000, 0x7bff})},
      {"brain",
       DType::BF16,
       {2},
       bytesOf(std::vector<uint16_t>{0x3f80, 0xbf80})},
      {"step", DType::I64, {}, bytesOf(std::vector<int64_t>{-123456789012345})},
      {"ids",
       DType::I32,
       {5},
       bytesOf(std::vector<int32_t>{0, -1, 2, 2147483647, -2147483647 - 1})},
      {"shorts", DType::I16, {1}, bytesOf(std::vector<int16_t>{-32768})},
      {"bytes", DType::I8, {3}, bytesOf(std::vector<int8_t>{-128, 0, 127})},
      {"pixels",
       DType::U8,
       {2, 2, 2},
       bytesOf(std::vector<uint8_t>{0, 1, 2, 3, 252, 253, 254, 255})},
      {"mask", DType::Bool, {4}, bytesOf(std::vector<uint8_t>{1, 0, 0, 1})},
  };
}

std::vector<TensorView> viewsOf(const std::vector<OwnedTensor> &tensors) {
  std::vector<TensorView> views;
  for (const OwnedTensor &tensor : tensors)
    views.push_back({tensor.name, tensor.dtype, tensor.shape,
                     tensor.bytes.empty() ? nullptr : tensor.bytes.data()});
  return views;
}

TEST(SafetensorsTest, RoundTripsEveryDTypeAndShape) {
  TempDir dir;
  std::string path = dir.file("all.safetensors");
  std::vector<OwnedTensor> tensors = sampleTensors();
  std::map<std::string, std::string> metadata = {
      {"format", "pt"},
      {"step", "12"},
      {"note", "quote \" newline \n caf\xC3\xA9"},
      {"", ""}};
  writeSafetensors(path, viewsOf(tensors), metadata);

  SafetensorsFile file = SafetensorsFile::open(path);
  EXPECT_EQ(file.path(), path);
  EXPECT_EQ(file.metadata(), metadata);
  ASSERT_EQ(file.tensors().size(), tensors.size());
  for (const OwnedTensor &tensor : tensors) {
    SCOPED_TRACE(tensor.name);
    const TensorInfo *info = file.find(tensor.name);
    ASSERT_NE(info, nullptr);
    EXPECT_EQ(info->name, tensor.name);
    EXPECT_EQ(info->dtype, tensor.dtype);
    EXPECT_EQ(info->shape, tensor.shape);
    EXPECT_EQ(info->end - info->begin, tensor.bytes.size());
    EXPECT_EQ(static_cast<size_t>(info->numel()) * dtypeSize(tensor.dtype),
              tensor.bytes.size());
    std::vector<uint8_t> bytes = file.readBytes(tensor.name);
    EXPECT_EQ(std::string(bytes.begin(), bytes.end()), tensor.bytes);
  }
  EXPECT_EQ(file.find("scalar")->numel(), 1);
  EXPECT_EQ(file.find("empty")->numel(), 0);
  EXPECT_EQ(file.readF32("weight"),
            (std::vector<float>{1.5f, -2.f, 3.25f, 0.f, -0.f, 1e30f}));
  EXPECT_EQ(file.readF32("scalar"), std::vector<float>{3.5f});
  EXPECT_TRUE(file.readF32("empty").empty());
}

TEST(SafetensorsTest, LaysOutDataLikeTheReferenceWriter) {
  TempDir dir;
  std::string path = dir.file("layout.safetensors");
  writeSafetensors(path, viewsOf(sampleTensors()));
  std::string bytes = readFile(path);
  uint64_t headerLength = 0;
  std::memcpy(&headerLength, bytes.data(), 8);
  EXPECT_EQ(headerLength % 8, 0u);
  std::string header = bytes.substr(8, headerLength);
  EXPECT_EQ(header.find("__metadata__"),
            std::string::npos); // None given, none written.
  size_t closing = header.rfind('}');
  EXPECT_EQ(header.find_first_not_of(' ', closing + 1), std::string::npos);
  EXPECT_LT(header.size() - closing - 1, 8u);

  SafetensorsFile file = SafetensorsFile::open(path);
  std::vector<std::string> order;
  for (const TensorInfo &info : file.tensors()) {
    order.push_back(info.name);
    EXPECT_EQ(info.begin % dtypeSize(info.dtype), 0u) << info.name;
  }
  // Descending reference dtype order (I64, F64, F32, I32, BF16, F16, I16, I8,
  // U8, BOOL), then by name; empty tensors sort by name like the rest.
  EXPECT_EQ(order, (std::vector<std::string>{
                       "step", "double", "empty", "scalar", "weight", "ids",
                       "brain", "half", "shorts", "bytes", "pixels", "mask"}));
}

// The exact bytes the reference implementation (safetensors.torch.save_file)
// writes for {"weight": 2x2 F32, "bias": 2 F32} with metadata {"format": "pt"}.
std::string referenceFileBytes() {
  std::string header =
      R"({"__metadata__":{"format":"pt"},"bias":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
      R"("weight":{"dtype":"F32","shape":[2,2],"data_offsets":[8,24]}})";
  header.append((8 - header.size() % 8) % 8, ' ');
  return safetensorsBytes(
      header, bytesOf(std::vector<float>{0.5f, -0.5f, 1.f, 2.f, 3.f, 4.f}));
}

TEST(SafetensorsTest, WritesTheReferenceBytes) {
  TempDir dir;
  std::string path = dir.file("ref.safetensors");
  std::vector<float> weight = {1.f, 2.f, 3.f, 4.f}, bias = {0.5f, -0.5f};
  writeSafetensors(path,
                   {{"weight", DType::F32, {2, 2}, weight.data()},
                    {"bias", DType::F32, {2}, bias.data()}},
                   {{"format", "pt"}});
  EXPECT_EQ(readFile(path), referenceFileBytes());
}

TEST(SafetensorsTest, ReadsAFileLaidOutByPyTorch) {
  TempDir dir;
  std::string path = dir.file("torch.safetensors");
  writeFile(path, referenceFileBytes());
  SafetensorsFile file = SafetensorsFile::open(path);
  EXPECT_EQ(file.metadata(),
            (std::map<std::string, std::string>{{"format", "pt"}}));
  ASSERT_EQ(file.tensors().size(), 2u);
  EXPECT_EQ(file.tensors()[0].name, "bias");
  EXPECT_EQ(file.tensors()[1].name, "weight");
  EXPECT_EQ(file.find("weight")->shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(file.readF32("weight"), (std::vector<float>{1.f, 2.f, 3.f, 4.f}));
  EXPECT_EQ(file.readF32("bias"), (std::vector<float>{0.5f, -0.5f}));
}

TEST(SafetensorsTest, ReadsHeadersInAnyOrderWithWhitespaceAndEscapes) {
  TempDir dir;
  std::string path = dir.file("loose.safetensors");
  // Other writers order keys differently, pretty-print and escape non-ASCII.
  std::string header = "{\n  \"layer.\\u00e9.w\": {\"data_offsets\": [8, 16], "
                       "\"shape\": [2], \"dtype\": \"F32\"},\n"
                       "  \"count\": {\"shape\": [], \"dtype\": \"I64\", "
                       "\"data_offsets\": [0, 8]},\n"
                       "  \"__metadata__\": {\"epoch\": \"3\"}\n}\t\r\n";
  std::string data =
      bytesOf(std::vector<int64_t>{42}) + bytesOf(std::vector<float>{7.f, 8.f});
  writeFile(path, safetensorsBytes(header, data));
  SafetensorsFile file = SafetensorsFile::open(path);
  EXPECT_EQ(file.metadata().at("epoch"), "3");
  ASSERT_NE(file.find("layer.\xC3\xA9.w"), nullptr);
  EXPECT_EQ(file.readF32("layer.\xC3\xA9.w"), (std::vector<float>{7.f, 8.f}));
  std::vector<uint8_t> count = file.readBytes("count");
  EXPECT_EQ(std::string(count.begin(), count.end()),
            bytesOf(std::vector<int64_t>{42}));
  EXPECT_EQ(file.tensors()[0].name, "count"); // Sorted by offset.
}

TEST(SafetensorsTest, WritesAndReadsAFileWithNoTensors) {
  TempDir dir;
  std::string path = dir.file("none.safetensors");
  writeSafetensors(path, {});
  EXPECT_EQ(readFile(path), safetensorsBytes("{}      ", ""));
  SafetensorsFile file = SafetensorsFile::open(path);
  EXPECT_TRUE(file.tensors().empty());
  EXPECT_TRUE(file.metadata().empty());
}

TEST(SafetensorsTest, FindReturnsNullForUnknownNames) {
  TempDir dir;
  std::string path = dir.file("one.safetensors");
  std::vector<float> values = {1.f};
  writeSafetensors(path, {{"a", DType::F32, {1}, values.data()}});
  SafetensorsFile file = SafetensorsFile::open(path);
  EXPECT_EQ(file.find("b"), nullptr);
  EXPECT_EQ(file.find(""), nullptr);
  EXPECT_EQ(file.find("A"), nullptr);
}

TEST(SafetensorsTest, ReadF32RejectsMissingAndNonF32Tensors) {
  TempDir dir;
  std::string path = dir.file("mixed.safetensors");
  std::vector<int64_t> step = {5};
  writeSafetensors(path, {{"step", DType::I64, {1}, step.data()}});
  SafetensorsFile file = SafetensorsFile::open(path);
  EXPECT_TRUE(failsWith([&] { file.readF32("nope"); }, path,
                        {"no tensor named \"nope\""}));
  EXPECT_TRUE(failsWith([&] { file.readBytes("nope"); }, path,
                        {"no tensor named \"nope\""}));
  EXPECT_TRUE(failsWith([&] { file.readF32("step"); }, path,
                        {"tensor \"step\" has dtype I64, not F32"}));
}

TEST(SafetensorsTest, CopiesShareTheOpenFile) {
  TempDir dir;
  std::string path = dir.file("shared.safetensors");
  std::vector<float> values = {1.f, 2.f};
  writeSafetensors(path, {{"v", DType::F32, {2}, values.data()}});
  std::optional<SafetensorsFile> original = SafetensorsFile::open(path);
  SafetensorsFile copy = *original;
  original.reset();
  EXPECT_EQ(copy.readF32("v"), values);
}

TEST(SafetensorsTest, ReadsTheValidatedFileEvenAfterItIsReplaced) {
  TempDir dir;
  std::string path = dir.file("replaced.safetensors");
  std::vector<float> before = {1.f, 2.f}, after = {3.f, 4.f, 5.f};
  writeSafetensors(path, {{"v", DType::F32, {2}, before.data()}});
  SafetensorsFile file = SafetensorsFile::open(path);
  writeSafetensors(path, {{"v", DType::F32, {3}, after.data()}});
  EXPECT_EQ(file.readF32("v"), before);
  EXPECT_EQ(SafetensorsFile::open(path).readF32("v"), after);
}

TEST(SafetensorsTest, ReadFailsCleanlyWhenTheFileShrinksAfterOpening) {
  TempDir dir;
  std::string path = dir.file("shrunk.safetensors");
  std::vector<float> values(100, 1.f);
  writeSafetensors(path, {{"v", DType::F32, {100}, values.data()}});
  SafetensorsFile file = SafetensorsFile::open(path);
  std::filesystem::resize_file(path, 64);
  EXPECT_TRUE(
      failsWith([&] { file.readF32("v"); }, path, {"unexpected end of file"}));
}

TEST(SafetensorsTest, WriterRejectsBadTensorsWithoutCreatingAFile) {
  TempDir dir;
  std::string path = dir.file("bad.safetensors");
  std::vector<float> values = {1.f, 2.f};
  struct Case {
    std::vector<TensorView> tensors;
    std::map<std::string, std::string> metadata;
    std::string fragment;
  };
  const Case cases[] = {
      {{{"a", DType::F32, {2}, values.data()},
        {"a", DType::F32, {2}, values.data()}},
       {},
       "tensor \"a\" twice"},
      {{{"a", DType::F32, {2, -1}, values.data()}},
       {},
       "shape dimension 1 is negative (-1)"},
      {{{"a", DType::F32, {2}, nullptr}}, {}, "tensor \"a\": data is null"},
      {{{"__metadata__", DType::F32, {2}, values.data()}},
       {},
       "the name is reserved"},
      {{{"bad\xFF", DType::F32, {2}, values.data()}},
       {},
       "tensor name \"bad\\xFF\": not valid UTF-8"},
      {{{"big", DType::F64, {1 << 30, 1 << 30, 1 << 30}, values.data()}},
       {},
       "too many elements"},
      {{}, {{"key", "\xC0\x80"}}, "metadata value"},
      {{}, {{"\xFE", "v"}}, "metadata key"},
  };
  for (const Case &c : cases) {
    EXPECT_TRUE(
        failsWith([&] { writeSafetensors(path, c.tensors, c.metadata); }, path,
                  {c.fragment}));
    EXPECT_TRUE(dir.entries().empty());
  }
}

} // namespace
} // namespace stringrt
