// Reading and writing safetensors files
// (https://github.com/huggingface/safetensors): an 8-byte little-endian header
// length N, N bytes of JSON describing each tensor, then the tensors' bytes.
// Used for checkpoints and for `load(...)` in models. Every file is untrusted:
// malformed ones throw stringrt::Error.
#pragma once

#include "stringrt/DType.h"

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace stringrt {

namespace detail {
class InputFile;
class MappedRegion;
}

// Headers larger than this are rejected (the reference implementation's limit).
constexpr uint64_t kMaxSafetensorsHeaderBytes = 100'000'000;

struct TensorInfo {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape; // Empty for a scalar.
  // Byte range [begin, end) relative to the first byte after the header.
  uint64_t begin = 0;
  uint64_t end = 0;

  int64_t numel() const;
};

// A safetensors file whose header has been read and fully validated; tensor
// data is read on demand. Copies share the open file, so data reads see the
// file that was validated even if its path is replaced later.
class SafetensorsFile {
public:
  static SafetensorsFile open(const std::string &path);

  const std::string &path() const { return path_; }
  // In data order (by begin offset).
  const std::vector<TensorInfo> &tensors() const { return tensors_; }
  // nullptr if there is no tensor of that name.
  const TensorInfo *find(std::string_view name) const;
  // The optional "__metadata__" string map; empty when absent.
  const std::map<std::string, std::string> &metadata() const {
    return metadata_;
  }

  // A tensor's raw little-endian bytes. Throws if there is no such tensor.
  std::vector<uint8_t> readBytes(std::string_view name) const;
  // A tensor's raw bytes mapped into memory in place (read from the file
  // as they are touched; unaligned for its dtype in general). Throws if
  // there is no such tensor.
  std::shared_ptr<const detail::MappedRegion> mapBytes(std::string_view name) const;
  // A tensor's elements. Throws if there is no such tensor or it is not F32.
  std::vector<float> readF32(std::string_view name) const;

private:
  SafetensorsFile() = default;
  const TensorInfo &require(std::string_view name) const;

  std::string path_;
  std::shared_ptr<const detail::InputFile> file_;
  uint64_t dataStart_ = 0;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, size_t, std::less<>> index_;
  std::map<std::string, std::string> metadata_;
};

// One tensor to write: `data` points at numel * dtypeSize(dtype) bytes in the
// host's (little-endian) layout; it may be null only when that is zero.
struct TensorView {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  const void *data = nullptr;
};

// Writes a safetensors file atomically: to "<path>.tmp.<pid>", fsync, then
// rename over `path`. On any failure the temporary file is removed, an Error
// is thrown and a previous file at `path` is left intact. Names must be
// unique, valid UTF-8 and not "__metadata__". Tensors are laid out as the
// reference writer does (grouped by dtype, larger element types first, then
// by name), so each starts aligned to its element size; the header is padded
// with spaces to a multiple of 8 bytes.
void writeSafetensors(const std::string &path,
                      const std::vector<TensorView> &tensors,
                      const std::map<std::string, std::string> &metadata = {});

} // namespace stringrt
