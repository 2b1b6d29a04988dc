#include "stringrt/Idx.h"

#include "data/Gzip.h"
#include "format/InputFile.h"
#include "stringrt/Error.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <filesystem>
#include <limits>

namespace stringrt {

namespace {

constexpr uint8_t kUnsignedByte = 0x08;
constexpr uint32_t kImagesMagic = 0x00000803;
constexpr uint32_t kLabelsMagic = 0x00000801;

uint32_t readBigEndian32(const uint8_t *bytes) {
  return uint32_t(bytes[0]) << 24 | uint32_t(bytes[1]) << 16 |
         uint32_t(bytes[2]) << 8 | uint32_t(bytes[3]);
}

struct IdxBytes {
  std::vector<uint8_t> bytes; // Decompressed if the file was gzipped.
  bool gzipped = false;
};

IdxBytes readIdxBytes(const std::string &path) {
  IdxBytes result;
  result.bytes = detail::InputFile(path).readAll(kMaxIdxBytes, "IDX files");
  result.gzipped = detail::isGzip(result.bytes);
  if (result.gzipped)
    result.bytes = detail::gunzip(path, result.bytes, kMaxIdxBytes);
  return result;
}

// Checks the magic and that the length matches the dimensions exactly;
// returns the dimensions. The elements start at 4 + 4 * dims.size().
std::vector<uint32_t> parseHeader(const std::string &path, const IdxBytes &file,
                                  uint32_t expectedMagic, const char *kind) {
  const std::vector<uint8_t> &bytes = file.bytes;
  const char *sizeNote = file.gzipped ? " after decompression" : "";
  if (bytes.size() < 4)
    throw Error(path, fmt::format("is {} bytes{}, too short for an IDX header",
                                  bytes.size(), sizeNote));
  uint32_t magic = readBigEndian32(bytes.data());
  uint8_t ndims = uint8_t(expectedMagic & 0xff);
  if (bytes[0] != 0 || bytes[1] != 0)
    throw Error(
        path,
        fmt::format(
            "bad magic 0x{:08X}: not an IDX file (expected 0x{:08X} for {})",
            magic, expectedMagic, kind));
  if (bytes[2] != kUnsignedByte)
    throw Error(path, fmt::format("IDX element type 0x{:02X} is not supported "
                                  "(expected 0x08, unsigned byte, for {})",
                                  bytes[2], kind));
  if (bytes[3] != ndims)
    throw Error(path, fmt::format("has {} dimensions (magic 0x{:08X}), "
                                  "expected {} for {} (magic 0x{:08X})",
                                  bytes[3], magic, ndims, kind, expectedMagic));
  size_t headerSize = 4 + 4 * size_t(ndims);
  if (bytes.size() < headerSize)
    throw Error(
        path,
        fmt::format(
            "is {} bytes{}, too short for an IDX header with {} dimensions",
            bytes.size(), sizeNote, ndims));
  std::vector<uint32_t> dims;
  for (size_t i = 0; i < ndims; ++i)
    dims.push_back(readBigEndian32(bytes.data() + 4 + 4 * i));

  // Three dimensions below 2^32 can overflow 64 bits when multiplied.
  uint64_t elements = 1;
  bool overflow = false;
  for (uint32_t dim : dims) {
    if (dim != 0 && elements > std::numeric_limits<uint64_t>::max() / dim)
      overflow = true;
    elements *= dim;
  }
  for (uint32_t dim : dims)
    if (dim == 0)
      overflow = false; // The product is zero after all.
  overflow =
      overflow || elements > std::numeric_limits<uint64_t>::max() - headerSize;
  if (overflow)
    throw Error(
        path,
        fmt::format(
            "is {} bytes{} but its header ({}) implies more than 2^64 bytes",
            bytes.size(), sizeNote, fmt::join(dims, " x ")));
  if (headerSize + elements != bytes.size())
    throw Error(path,
                fmt::format("is {} bytes{} but its header ({}) implies {} "
                            "bytes ({} of header, {} of data)",
                            bytes.size(), sizeNote, fmt::join(dims, " x "),
                            headerSize + elements, headerSize, elements));
  return dims;
}

} // namespace

IdxImages readIdxImages(const std::string &path) {
  IdxBytes file = readIdxBytes(path);
  std::vector<uint32_t> dims = parseHeader(path, file, kImagesMagic, "images");
  if (dims[1] == 0 || dims[2] == 0)
    throw Error(path, fmt::format("images are {} x {} pixels, which is empty",
                                  dims[1], dims[2]));
  IdxImages images;
  images.count = dims[0];
  images.rows = dims[1];
  images.cols = dims[2];
  file.bytes.erase(file.bytes.begin(), file.bytes.begin() + 16);
  images.pixels = std::move(file.bytes);
  return images;
}

std::vector<uint8_t> readIdxLabels(const std::string &path, int numClasses) {
  if (numClasses < 1 || numClasses > 256)
    throw Error(path, fmt::format("cannot read labels for {} classes: the "
                                  "class count must be in 1..256",
                                  numClasses));
  IdxBytes file = readIdxBytes(path);
  parseHeader(path, file, kLabelsMagic, "labels");
  std::vector<uint8_t> bytes(file.bytes.begin() + 8, file.bytes.end());
  for (size_t i = 0; i < bytes.size(); ++i)
    if (bytes[i] >= numClasses)
      throw Error(
          path,
          fmt::format("label {} at index {} is out of range for {} classes",
                      bytes[i], i, numClasses));
  return bytes;
}

namespace {

// A split's files are "<split><kind>", e.g. "train-images-idx3-ubyte".
const char *const kIdxSplits[] = {"train", "t10k"};
const char *const kImagesFile = "-images-idx3-ubyte";
const char *const kLabelsFile = "-labels-idx1-ubyte";

// "<dir>/<name>", or "<dir>/<name>.gz" if only that exists.
std::string findIdxFile(const std::filesystem::path &dir,
                        const std::string &name) {
  std::filesystem::path plain = dir / name;
  std::filesystem::path gzipped = dir / (name + ".gz");
  std::error_code ignored;
  if (std::filesystem::exists(plain, ignored))
    return plain.string();
  if (std::filesystem::exists(gzipped, ignored))
    return gzipped.string();
  throw Error(dir.string(), fmt::format("missing {} (or {}.gz)", name, name));
}

IdxSplit loadSplit(const std::filesystem::path &dir, const std::string &prefix,
                   int numClasses) {
  std::string imagesPath = findIdxFile(dir, prefix + kImagesFile);
  std::string labelsPath = findIdxFile(dir, prefix + kLabelsFile);
  IdxSplit split;
  split.images = readIdxImages(imagesPath);
  split.labels = readIdxLabels(labelsPath, numClasses);
  if (split.images.count == 0)
    throw Error(imagesPath, "contains no images");
  if (static_cast<int64_t>(split.labels.size()) != split.images.count)
    throw Error(dir.string(),
                fmt::format("{} has {} images but {} has {} labels", imagesPath,
                            split.images.count, labelsPath,
                            split.labels.size()));
  return split;
}

} // namespace

std::vector<std::string> idxDatasetFiles(const std::string &dir) {
  std::vector<std::string> files;
  std::error_code ignored;
  for (const char *split : kIdxSplits)
    for (const char *kind : {kImagesFile, kLabelsFile}) {
      const std::string name = split + std::string(kind);
      for (const std::string &file : {name, name + ".gz"}) {
        std::filesystem::path path = std::filesystem::path(dir) / file;
        if (std::filesystem::exists(path, ignored))
          files.push_back(path.string());
      }
    }
  return files;
}

IdxDataset loadIdxDataset(const std::string &dir, int numClasses) {
  std::error_code error;
  if (!std::filesystem::is_directory(dir, error))
    throw Error(dir, std::filesystem::exists(dir, error) ? "is not a directory"
                                                         : "no such directory");
  IdxDataset dataset;
  dataset.train = loadSplit(dir, kIdxSplits[0], numClasses);
  dataset.test = loadSplit(dir, kIdxSplits[1], numClasses);
  const IdxImages &train = dataset.train.images, &test = dataset.test.images;
  if (train.rows != test.rows || train.cols != test.cols)
    throw Error(
        dir, fmt::format("train images are {} x {} but test images are {} x {}",
                         train.rows, train.cols, test.rows, test.cols));
  return dataset;
}

} // namespace stringrt
