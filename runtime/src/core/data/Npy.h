// NumPy .npy arrays (format versions 1.0, 2.0 and 3.0): the magic
// "\x93NUMPY", a version, a little-endian header length, a Python dict
// literal {'descr': ..., 'fortran_order': False, 'shape': (...)} padded with
// spaces, then the elements. Private to the runtime.
//
// Strict: little-endian (or one-byte) numeric dtypes only, C order only,
// and the data must be exactly the bytes the shape needs.
#pragma once

#include "stringrt/DType.h"

#include <cstdint>
#include <string>
#include <vector>

namespace stringrt::detail {

// An array read from a data file (.npy, an .npz entry, a safetensors
// tensor): row-major little-endian elements.
struct DataArray {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;

  int64_t numel() const;
};

// Parses a whole .npy file held in `bytes` (moved into the result's data).
// Errors name `path` and, when not empty, `entry` (an .npz member).
DataArray parseNpy(const std::string &path, const std::string &entry,
                   std::vector<uint8_t> bytes);

// Reads and parses a .npy file of at most `maxBytes` bytes.
DataArray readNpyFile(const std::string &path, uint64_t maxBytes);

} // namespace stringrt::detail
