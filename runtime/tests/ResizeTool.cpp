// stringrt_resize_tool IN.safetensors OUT.safetensors ROWS COLS TOKENS:
// the runtime's resizes (stringrt/Resize.h) of IN's "image" [C, H, W] to
// ROWS x COLS (OUT's "bilinear", "bicubic") and of its "table" [T, D] to
// TOKENS rows ("table"), for tests/oracle/test_resize.py to compare with
// torch's F.interpolate.
#include "stringrt/Error.h"
#include "stringrt/Resize.h"
#include "stringrt/Safetensors.h"

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

int main(int argc, char **argv) {
  if (argc != 6) {
    std::fprintf(stderr, "usage: stringrt_resize_tool IN OUT ROWS COLS TOKENS\n");
    return 2;
  }
  try {
    const int64_t rows = std::atoll(argv[3]), cols = std::atoll(argv[4]), tokens = std::atoll(argv[5]);
    stringrt::SafetensorsFile in = stringrt::SafetensorsFile::open(argv[1]);
    const std::vector<int64_t> imageShape = in.find("image")->shape;
    const std::vector<int64_t> tableShape = in.find("table")->shape;
    std::vector<float> image = in.readF32("image"), table = in.readF32("table");
    const int64_t c = imageShape.at(0), h = imageShape.at(1), w = imageShape.at(2);
    std::vector<float> bilinear(static_cast<size_t>(c * rows * cols)), bicubic(bilinear.size());
    stringrt::resizeBilinear(image.data(), c, h, w, bilinear.data(), rows, cols);
    stringrt::resizeBicubic(image.data(), c, h, w, bicubic.data(), rows, cols);
    std::vector<float> resized =
        stringrt::resizePositionTable(table, tableShape.at(0), tableShape.at(1), tokens);
    stringrt::writeSafetensors(
        argv[2], {{"bilinear", stringrt::DType::F32, {c, rows, cols}, bilinear.data()},
                  {"bicubic", stringrt::DType::F32, {c, rows, cols}, bicubic.data()},
                  {"table", stringrt::DType::F32, {tokens, tableShape.at(1)}, resized.data()}});
  } catch (const std::exception &e) {
    std::fprintf(stderr, "stringrt_resize_tool: %s\n", e.what());
    return 1;
  }
  return 0;
}
