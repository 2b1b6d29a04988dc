// Image and token data sets from .npy, .npz and safetensors files
// (ArrayData.h), written here byte by byte: good files give the same batches
// as the IDX and text paths, and every malformed kind is an Error naming the
// file and what is wrong.
#include "stringrt/ArrayData.h"

#include "TestFiles.h"
#include "stringrt/Error.h"
#include "stringrt/Safetensors.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <unistd.h>

namespace stringrt {
namespace {

using test::failsWith;
using test::littleEndian;
using test::TempDir;
using test::writeFile;

// A .npy file, version 1.0, its header padded as NumPy pads it.
std::string npy(const std::string &descr, const std::string &shape, const std::string &data,
                const std::string &order = "False") {
  std::string header =
      "{'descr': '" + descr + "', 'fortran_order': " + order + ", 'shape': " + shape + ", }";
  while ((10 + header.size() + 1) % 64 != 0)
    header += ' ';
  header += '\n';
  return std::string("\x93NUMPY\x01\x00", 8) + littleEndian(header.size(), 2) + header + data;
}

std::string rawDeflate(const std::string &data) {
  z_stream s{};
  EXPECT_EQ(deflateInit2(&s, 9, Z_DEFLATED, -MAX_WBITS, 8, Z_DEFAULT_STRATEGY), Z_OK);
  std::string out(deflateBound(&s, data.size()), '\0');
  s.next_in = reinterpret_cast<Bytef *>(const_cast<char *>(data.data()));
  s.avail_in = static_cast<uInt>(data.size());
  s.next_out = reinterpret_cast<Bytef *>(out.data());
  s.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&s, Z_FINISH), Z_STREAM_END);
  out.resize(s.total_out);
  deflateEnd(&s);
  return out;
}

struct Member {
  std::string name;
  std::string data;
  bool deflated = false;
};

// A zip archive as np.savez (stored) or np.savez_compressed (deflated)
// writes it: local headers and data, the central directory, the end record.
std::string zip(const std::vector<Member> &members) {
  std::string body, directory;
  for (const Member &m : members) {
    const std::string stored = m.deflated ? rawDeflate(m.data) : m.data;
    const uint32_t crc =
        crc32(0, reinterpret_cast<const Bytef *>(m.data.data()), static_cast<uInt>(m.data.size()));
    const std::string common = littleEndian(m.deflated ? 8 : 0, 2) + littleEndian(0, 4) +
                               littleEndian(crc, 4) + littleEndian(stored.size(), 4) +
                               littleEndian(m.data.size(), 4) + littleEndian(m.name.size(), 2) +
                               littleEndian(0, 2);
    directory += littleEndian(0x02014b50, 4) + littleEndian(20, 2) + littleEndian(20, 2) +
                 littleEndian(0, 2) + common + littleEndian(0, 2) + littleEndian(0, 2) +
                 littleEndian(0, 2) + littleEndian(0, 4) + littleEndian(body.size(), 4) + m.name;
    body += littleEndian(0x04034b50, 4) + littleEndian(20, 2) + littleEndian(0, 2) + common +
            m.name + stored;
  }
  return body + directory + littleEndian(0x06054b50, 4) + littleEndian(0, 4) +
         littleEndian(members.size(), 2) + littleEndian(members.size(), 2) +
         littleEndian(directory.size(), 4) + littleEndian(body.size(), 4) + littleEndian(0, 2);
}

// count 4x4 images: pixel p of image i is (i * 10 + p + seed) % 256, label
// (i + seed) % 10; the same as IDX files in `dir`.
std::string pixels(uint32_t count, uint32_t seed) {
  std::string bytes;
  for (uint32_t i = 0; i < count * 16; ++i)
    bytes += static_cast<char>((i / 16 * 10 + i % 16 + seed) % 256);
  return bytes;
}
std::vector<int64_t> labels(uint32_t count, uint32_t seed) {
  std::vector<int64_t> out;
  for (uint32_t i = 0; i < count; ++i)
    out.push_back((i + seed) % 10);
  return out;
}
void writeIdx(const std::string &dir, const std::string &prefix, uint32_t count, uint32_t seed) {
  auto bigEndian = [](uint32_t v) {
    std::string s;
    for (int shift = 24; shift >= 0; shift -= 8)
      s += static_cast<char>(v >> shift & 0xFF);
    return s;
  };
  std::string lab;
  for (int64_t l : labels(count, seed))
    lab += static_cast<char>(l);
  writeFile(dir + "/" + prefix + "-images-idx3-ubyte", std::string("\0\0\x08\x03", 4) +
                                                           bigEndian(count) + bigEndian(4) +
                                                           bigEndian(4) + pixels(count, seed));
  writeFile(dir + "/" + prefix + "-labels-idx1-ubyte",
            std::string("\0\0\x08\x01", 4) + bigEndian(count) + lab);
}

// The four arrays of a 5 + 3 image set of 4x4 u8 images ([N, H, W]).
std::vector<Member> imageMembers(bool deflated = false) {
  return {{"train_images.npy", npy("|u1", "(5, 4, 4)", pixels(5, 1)), deflated},
          {"train_labels.npy", npy("<i8", "(5,)", test::bytesOf(labels(5, 1))), deflated},
          {"test_images.npy", npy("|u1", "(3, 4, 4)", pixels(3, 2)), deflated},
          {"test_labels.npy", npy("<i8", "(3,)", test::bytesOf(labels(3, 2))), deflated}};
}

void expectSameBatches(const DataSet &a, const DataSet &b) {
  for (Split split : {Split::Train, Split::Test}) {
    ASSERT_EQ(a.count(split), b.count(split));
    Batch x = a.range(split, 0, a.count(split)), y = b.range(split, 0, b.count(split));
    ASSERT_EQ(x.tensors.size(), y.tensors.size());
    for (size_t t = 0; t < x.tensors.size(); ++t) {
      EXPECT_EQ(x.tensors[t].shape, y.tensors[t].shape);
      ASSERT_EQ(x.tensors[t].f32.size(), y.tensors[t].f32.size());
      if (!x.tensors[t].f32.empty()) // memcmp may not see null (an empty vector's data())
        EXPECT_EQ(std::memcmp(x.tensors[t].f32.data(), y.tensors[t].f32.data(),
                              x.tensors[t].f32.size() * sizeof(float)),
                  0);
      EXPECT_EQ(x.tensors[t].i32, y.tensors[t].i32);
    }
  }
}

struct ImageFiles {
  TempDir dir;
  std::string idx = dir.file("idx");
  ImageFiles() {
    std::filesystem::create_directory(idx);
    writeIdx(idx, "train", 5, 1);
    writeIdx(idx, "t10k", 3, 2);
  }
};

TEST(ArrayDataTest, NpzImagesAreTheIdxBits) {
  ImageFiles fx;
  DataSet idx = DataSet::idx(fx.idx);
  for (bool deflated : {false, true}) {
    std::string path = fx.dir.file(deflated ? "c.npz" : "s.npz");
    writeFile(path, zip(imageMembers(deflated)));
    DataSet arrays = loadArrayImages(path, 10);
    EXPECT_EQ(arrays.exampleShapes(), idx.exampleShapes());
    expectSameBatches(idx, arrays);
  }
}

TEST(ArrayDataTest, NchwImagesAndNarrowLabelTypes) {
  ImageFiles fx;
  std::vector<int32_t> trainLabels = {1, 2, 3, 4, 5};
  std::string testLabels = {7, 8, 9};
  std::string path = fx.dir.file("nchw.npz");
  writeFile(path, zip({{"train_images.npy", npy("|u1", "(5, 1, 4, 4)", pixels(5, 1))},
                       {"train_labels.npy", npy("<i4", "(5,)", test::bytesOf(trainLabels))},
                       {"test_images.npy", npy("|u1", "(3, 1, 4, 4)", pixels(3, 2))},
                       {"test_labels.npy", npy("|u1", "(3,)", testLabels)},
                       {"classes.npy", npy("<f4", "(0,)", "")}}));
  DataSet data = loadArrayImages(path, 10);
  EXPECT_EQ(data.range(Split::Train, 0, 5).tensors[1].i32, trainLabels);
  EXPECT_EQ(data.range(Split::Test, 0, 3).tensors[1].i32, (std::vector<int32_t>{7, 8, 9}));
}

TEST(ArrayDataTest, SafetensorsImagesAreTheIdxBits) {
  ImageFiles fx;
  std::string train = pixels(5, 1), test = pixels(3, 2);
  std::vector<int64_t> trainLabels = labels(5, 1), testLabels = labels(3, 2);
  std::string path = fx.dir.file("data.safetensors");
  writeSafetensors(path, {{"train_images", DType::U8, {5, 1, 4, 4}, train.data()},
                          {"train_labels", DType::I64, {5}, trainLabels.data()},
                          {"test_images", DType::U8, {3, 4, 4}, test.data()},
                          {"test_labels", DType::I64, {3}, testLabels.data()}});
  expectSameBatches(DataSet::idx(fx.idx), loadArrayImages(path, 10));
}

TEST(ArrayDataTest, Float32ImagesAreTakenAsTheyAre) {
  TempDir dir;
  std::vector<float> train(2 * 3 * 2 * 2), test(3 * 2 * 2);
  for (size_t i = 0; i < train.size(); ++i)
    train[i] = 0.25f * static_cast<float>(i) - 1.0f;
  std::string path = dir.file("f.npz");
  writeFile(path, zip({{"train_images.npy", npy("<f4", "(2, 3, 2, 2)", test::bytesOf(train))},
                       {"train_labels.npy", npy("|u1", "(2,)", std::string("\0\1", 2))},
                       {"test_images.npy", npy("<f4", "(1, 3, 2, 2)", test::bytesOf(test))},
                       {"test_labels.npy", npy("|u1", "(1,)", std::string("\2", 1))}}));
  DataSet data = loadArrayImages(path, 3);
  EXPECT_EQ(data.exampleShapes()[0], (std::vector<int64_t>{3, 2, 2}));
  Batch batch = data.range(Split::Train, 0, 2);
  EXPECT_EQ(batch.tensors[0].shape, (std::vector<int64_t>{2, 3, 2, 2}));
  EXPECT_EQ(batch.tensors[0].f32, train);
}

// Images of a safetensors file are read in place from a mapping, as the
// batches take them: f32 ones give the .npz bits, a non-finite pixel is an
// error of the batch that reads it (only), and loading touches no pixel.
TEST(ArrayDataTest, SafetensorsImagesAreMappedAndReadAsBatchesTakeThem) {
  TempDir dir;
  std::vector<float> train(4 * 3 * 2 * 2), test(2 * 3 * 2 * 2);
  for (size_t i = 0; i < train.size(); ++i)
    train[i] = 0.25f * static_cast<float>(i) - 1.0f;
  for (size_t i = 0; i < test.size(); ++i)
    test[i] = 0.5f - 0.125f * static_cast<float>(i);
  test[12 + 5] = std::nanf(""); // image 1 of the test split
  std::vector<int64_t> trainLabels = {0, 1, 2, 0}, testLabels = {2, 1};
  std::string npz = dir.file("f.npz"), st = dir.file("f.safetensors");
  std::vector<float> testWithoutNan = test;
  testWithoutNan[12 + 5] = 0.0f;
  writeFile(npz, zip({{"train_images.npy", npy("<f4", "(4, 3, 2, 2)", test::bytesOf(train))},
                      {"train_labels.npy", npy("<i8", "(4,)", test::bytesOf(trainLabels))},
                      {"test_images.npy", npy("<f4", "(2, 3, 2, 2)", test::bytesOf(testWithoutNan))},
                      {"test_labels.npy", npy("<i8", "(2,)", test::bytesOf(testLabels))}}));
  writeSafetensors(st, {{"train_images", DType::F32, {4, 3, 2, 2}, train.data()},
                        {"train_labels", DType::I64, {4}, trainLabels.data()},
                        {"test_images", DType::F32, {2, 3, 2, 2}, test.data()},
                        {"test_labels", DType::I64, {2}, testLabels.data()}});
  DataSet fromNpz = loadArrayImages(npz, 3), mapped = loadArrayImages(st, 3);
  Batch a = fromNpz.range(Split::Train, 0, 4), b = mapped.range(Split::Train, 0, 4);
  EXPECT_EQ(a.tensors[0].f32, b.tensors[0].f32);
  EXPECT_EQ(b.tensors[0].f32, train);
  EXPECT_EQ(a.tensors[1].i32, b.tensors[1].i32);
  const int64_t first = 0;
  EXPECT_EQ(mapped.batch(Split::Test, &first, 1).tensors[0].f32,
            std::vector<float>(test.begin(), test.begin() + 12));
  const int64_t second = 1;
  EXPECT_TRUE(failsWith([&] { mapped.batch(Split::Test, &second, 1); }, st,
                        {"array \"test_images\" has a non-finite pixel (nan) at element 17"}));
}

TEST(ArrayDataTest, MappedImagesAreReadOnlyWhereBatchesTakeThem) {
  // 96 MiB of u8 images: loading maps them without reading, a batch of 4
  // images reads about its own pages (resident memory, /proc/self/statm).
  TempDir dir;
  const int64_t count = 1536, side = 256; // 64 KiB an image
  std::string images(static_cast<size_t>(count * side * side), '\0');
  for (size_t i = 0; i < images.size(); i += 4096)
    images[i] = static_cast<char>(i / 4096 % 251);
  std::vector<int64_t> trainLabels(static_cast<size_t>(count), 1), testLabels = {3};
  std::string path = dir.file("big.safetensors");
  writeSafetensors(path, {{"train_images", DType::U8, {count, side, side}, images.data()},
                          {"train_labels", DType::I64, {count}, trainLabels.data()},
                          {"test_images", DType::U8, {1, side, side}, images.data()},
                          {"test_labels", DType::I64, {1}, testLabels.data()}});
  images = std::string(); // not resident any more
  auto residentBytes = [] {
    std::ifstream statm("/proc/self/statm");
    uint64_t size = 0, resident = 0;
    statm >> size >> resident;
    return resident * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  };
  const uint64_t before = residentBytes();
  DataSet data = loadArrayImages(path, 10);
  const uint64_t loaded = residentBytes();
  const int64_t indices[] = {7, 700, 1400, 1535};
  Batch batch = data.batch(Split::Train, indices, 4);
  const uint64_t batched = residentBytes();
  EXPECT_EQ(batch.tensors[0].f32[0], static_cast<float>(7 * 16 % 251) / 255.0f);
  EXPECT_EQ(batch.tensors[0].f32[3 * side * side], static_cast<float>(1535 * 16 % 251) / 255.0f);
  // Without the mapping loading would grow by the 96 MiB read. A batch's own
  // growth is its floats (1 MiB), the pool's first use and, under ASan, its
  // shadow and allocator (8.5 MiB in CI's sanitizer build): 32 MiB leaves
  // room for those and still catches a read of the whole file.
  const uint64_t bound = uint64_t(32) << 20;
  EXPECT_LT(loaded, before + bound) << "loading read the images";
  EXPECT_LT(batched, loaded + bound) << "a batch of 4 read more than its images";
}

TEST(ArrayDataTest, TokensFromNpyAreSplitLikeText) {
  TempDir dir;
  std::vector<int64_t> tokens;
  for (int i = 0; i < 50; ++i)
    tokens.push_back((i * 7) % 300);
  std::string path = dir.file("tokens.npy");
  writeFile(path, npy("<i8", "(50,)", test::bytesOf(tokens)));
  DataSet data = loadArrayTokens(path, 4, 300);
  std::vector<int32_t> all(tokens.begin(), tokens.end());
  DataSet expected = DataSet::textFromTokens({all.begin(), all.begin() + 45},
                                             {all.begin() + 45, all.end()}, 4, 300);
  expectSameBatches(expected, data);
  EXPECT_TRUE(failsWith([&] { loadArrayTokens(path, 4, 256); }, path,
                        {"array \"tokens\" has token 259 at index", "outside [0, 256)"}));
}

TEST(ArrayDataTest, TokensFromNpzAndSafetensors) {
  TempDir dir;
  std::vector<int32_t> train = {1, 2, 3, 4, 5, 6, 7}, test = {9, 8, 7};
  std::string npz = dir.file("t.npz"), st = dir.file("t.safetensors");
  writeFile(npz, zip({{"train_tokens.npy", npy("<i4", "(7,)", test::bytesOf(train)), true},
                      {"test_tokens.npy", npy("<i4", "(3,)", test::bytesOf(test))}}));
  writeSafetensors(st, {{"train_tokens", DType::I32, {7}, train.data()},
                        {"test_tokens", DType::I32, {3}, test.data()}});
  DataSet expected = DataSet::textFromTokens(train, test, 2, 16);
  expectSameBatches(expected, loadArrayTokens(npz, 2, 16));
  expectSameBatches(expected, loadArrayTokens(st, 2, 16));
}

// Writes `bytes` and expects loading them as images (or tokens for .npy)
// to fail naming the file and every fragment.
::testing::AssertionResult refused(const TempDir &dir, const std::string &name,
                                   const std::string &bytes,
                                   const std::vector<std::string> &fragments) {
  std::string path = dir.file(name);
  writeFile(path, bytes);
  bool npyFile = name.size() > 4 && name.substr(name.size() - 4) == ".npy";
  return failsWith(
      [&] {
        if (npyFile)
          loadArrayTokens(path, 2, 256);
        else
          loadArrayImages(path, 10);
      },
      path, fragments);
}

// The image set with member `index` replaced.
std::string withMember(size_t index, Member member) {
  std::vector<Member> members = imageMembers();
  members[index] = std::move(member);
  return zip(members);
}

TEST(ArrayDataTest, MalformedNpyFiles) {
  TempDir dir;
  const std::string good = npy("<i8", "(3,)", test::bytesOf(std::vector<int64_t>{1, 2, 3}));
  EXPECT_TRUE(refused(dir, "magic.npy", "PK" + good.substr(2), {"does not start with the magic"}));
  EXPECT_TRUE(refused(dir, "short.npy", good.substr(0, 7), {"too short for the .npy version"}));
  EXPECT_TRUE(refused(dir, "version.npy", good.substr(0, 6) + "\x04" + good.substr(7),
                      {"version 4.0 is not supported"}));
  EXPECT_TRUE(refused(dir, "header.npy", good.substr(0, 40),
                      {"header of 118 bytes runs past", "truncated"}));
  EXPECT_TRUE(refused(dir, "big.npy", npy(">i8", "(3,)", std::string(24, '\0')),
                      {"dtype \">i8\" is not supported", "little-endian"}));
  EXPECT_TRUE(refused(dir, "str.npy", npy("<U3", "(3,)", std::string(36, '\0')),
                      {"dtype \"<U3\" is not supported"}));
  EXPECT_TRUE(refused(dir, "fortran.npy", npy("<i8", "(3,)", std::string(24, '\0'), "True"),
                      {"fortran_order is True"}));
  EXPECT_TRUE(refused(dir, "size.npy", npy("<i8", "(4,)", std::string(24, '\0')),
                      {"shape (4) of <i8 needs 32 bytes of data but 24 follow"}));
  EXPECT_TRUE(refused(dir, "huge.npy",
                      npy("<i8", "(4294967296, 4294967296, 4294967296)", std::string(24, '\0')),
                      {"needs more than 2^64 bytes of data but 24 follow"}));
  EXPECT_TRUE(refused(dir, "float.npy", npy("<f4", "(3,)", std::string(12, '\0')),
                      {"array \"tokens\" has dtype F32", "integers"}));
  EXPECT_TRUE(refused(dir, "rank.npy", npy("<i8", "(1, 3)", std::string(24, '\0')),
                      {"has shape [1, 3], expected [N]"}));
  std::string badKey = good;
  badKey.replace(badKey.find("'shape'"), 7, "'shapf'");
  EXPECT_TRUE(refused(dir, "badkey.npy", badKey, {"unexpected key \"shapf\""}));
  std::string badShape = good;
  badShape.replace(badShape.find("(3,)"), 4, "(x, )");
  EXPECT_TRUE(
      refused(dir, "badshape.npy", badShape, {"shape dimension 0 is not a non-negative integer"}));
  std::string imagesNpy = dir.file("images-only.npy");
  writeFile(imagesNpy, good);
  EXPECT_TRUE(failsWith([&] { loadArrayImages(imagesNpy, 10); }, imagesNpy,
                        {"a .npy file holds one array", "an .npz or safetensors file"}));
}

TEST(ArrayDataTest, MalformedImageSets) {
  TempDir dir;
  EXPECT_TRUE(refused(
      dir, "rank.npz", withMember(0, {"train_images.npy", npy("|u1", "(80,)", pixels(5, 1))}),
      {"array \"train_images\" has shape [80], expected [N, C, H, W] or [N, H, W]"}));
  EXPECT_TRUE(
      refused(dir, "count.npz",
              withMember(1, {"train_labels.npy", npy("<i8", "(4,)", test::bytesOf(labels(4, 1)))}),
              {"array \"train_images\" has 5 images but \"train_labels\" has 4 labels"}));
  EXPECT_TRUE(
      refused(dir, "range.npz",
              withMember(3, {"test_labels.npy",
                             npy("<i8", "(3,)", test::bytesOf(std::vector<int64_t>{0, 10, 1}))}),
              {"array \"test_labels\" has label 10 at index 1, outside [0, 10)"}));
  EXPECT_TRUE(
      refused(dir, "negative.npz",
              withMember(3, {"test_labels.npy",
                             npy("<i8", "(3,)", test::bytesOf(std::vector<int64_t>{0, -1, 1}))}),
              {"has label -1 at index 1"}));
  EXPECT_TRUE(
      refused(dir, "labeltype.npz",
              withMember(1, {"train_labels.npy", npy("<f4", "(5,)", std::string(20, '\0'))}),
              {"array \"train_labels\" has dtype F32; labels must be integers"}));
  EXPECT_TRUE(
      refused(dir, "imagetype.npz",
              withMember(2, {"test_images.npy", npy("<i4", "(3, 4, 4)", std::string(192, '\0'))}),
              {"array \"test_images\" has dtype I32; images must be U8"}));
  EXPECT_TRUE(refused(dir, "mismatch.npz",
                      withMember(2, {"test_images.npy", npy("|u1", "(3, 2, 8)", pixels(3, 2))}),
                      {"train images are [1, 4, 4] but test images are [1, 2, 8]"}));
  EXPECT_TRUE(refused(dir, "empty.npz",
                      withMember(0, {"train_images.npy", npy("|u1", "(0, 4, 4)", "")}),
                      {"array \"train_images\" holds no images"}));
  const float nan = std::nanf("");
  EXPECT_TRUE(
      refused(dir, "nan.npz",
              withMember(2, {"test_images.npy", npy("<f4", "(3, 1, 1)",
                                                    test::bytesOf(std::vector<float>{0, nan, 1}))}),
              {"array \"test_images\" has a non-finite pixel (nan) at element 1"}));
  std::vector<Member> missing = imageMembers();
  missing.pop_back();
  EXPECT_TRUE(
      refused(dir, "missing.npz", zip(missing),
              {"has no array \"test_labels\" (it has: train_images, train_labels, test_images)"}));
  EXPECT_TRUE(refused(dir, "badmember.npz", withMember(0, {"train_images.npy", "not an array"}),
                      {"array \"train_images.npy\": not a .npy array"}));
  std::string st = dir.file("missing.safetensors");
  writeSafetensors(st, {{"train_images", DType::U8, {1, 1, 1}, "x"}});
  EXPECT_TRUE(failsWith([&] { loadArrayImages(st, 10); }, st,
                        {"has no array \"train_labels\" (it has: train_images)"}));
}

TEST(ArrayDataTest, MalformedZipArchives) {
  TempDir dir;
  const std::string good = zip(imageMembers());
  EXPECT_TRUE(refused(dir, "tiny.npz", "PK", {"too short for a zip archive"}));
  EXPECT_TRUE(refused(dir, "notzip.npz", std::string(100, 'x'),
                      {"not a zip archive: no end-of-central-directory record"}));
  EXPECT_TRUE(refused(dir, "truncated.npz", good.substr(good.size() / 2),
                      {"central directory", "runs past its end record"}));
  std::string crc = good;
  crc[crc.find("train_images.npy") + 20] ^= 1; // a byte of the first member's data
  EXPECT_TRUE(
      refused(dir, "crc.npz", crc, {"zip member \"train_images.npy\" fails its CRC-32 check"}));
  std::string corrupt = zip(imageMembers(true));
  corrupt[corrupt.find("train_images.npy") + 16] ^= 0x55;
  EXPECT_TRUE(refused(dir, "corrupt.npz", corrupt, {"zip member \"train_images.npy\""}));
  std::string method = good;
  // The central directory's first method field (its first entry).
  size_t directory = method.find(std::string("PK\x01\x02", 4));
  method[directory + 10] = 12; // bzip2
  EXPECT_TRUE(refused(dir, "method.npz", method, {"compression method 12"}));
  std::string encrypted = good;
  encrypted[directory + 8] = 1;
  EXPECT_TRUE(refused(dir, "encrypted.npz", encrypted, {"is encrypted"}));
  // A tiny deflated member that claims 2 GiB: refused before allocating it.
  std::string bomb = zip(imageMembers(true));
  size_t entry = bomb.find(std::string("PK\x01\x02", 4));
  bomb.replace(entry + 24, 4, littleEndian(uint64_t(2) << 30, 4));
  EXPECT_TRUE(refused(dir, "bomb.npz", bomb,
                      {"records 2147483648 bytes uncompressed, more "
                       "than deflate can make"}));
}

} // namespace
} // namespace stringrt
