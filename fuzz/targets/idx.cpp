// Fuzz target: IDX image and label files (Idx.h), plain or gzipped. The same
// bytes are read as an image file and as a label file of 10 classes; what
// loads must be consistent with its header.
#include "FuzzFile.h"

#include "stringrt/Error.h"
#include "stringrt/Idx.h"

#include <cstdint>
#include <cstdlib>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static stringc::fuzz::FuzzFile file("data-idx-ubyte");
  file.write(data, size);
  try {
    stringrt::IdxImages images = stringrt::readIdxImages(file.path());
    if (images.rows < 1 || images.cols < 1 || images.count < 0 ||
        images.pixels.size() != uint64_t(images.count) * uint64_t(images.rows) * uint64_t(images.cols))
      std::abort();
  } catch (const stringrt::Error &) {
  }
  try {
    std::vector<uint8_t> labels = stringrt::readIdxLabels(file.path(), 10);
    for (uint8_t label : labels)
      if (label >= 10)
        std::abort();
  } catch (const stringrt::Error &) {
  }
  return 0;
}
