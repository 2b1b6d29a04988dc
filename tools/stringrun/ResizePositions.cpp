#include "ResizePositions.h"

#include "stringrt/Error.h"
#include "stringrt/Resize.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace stringrun {

namespace {
std::string shapeText(const std::vector<int64_t> &shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}
} // namespace

stringrt::ParameterAdapter positionTableAdapter(const std::string &path, bool resize) {
  return [path, resize](const std::string &name, const std::vector<int64_t> &fileShape,
                        std::vector<float> values,
                        const std::vector<int64_t> &modelShape) -> std::vector<float> {
    const bool table = fileShape.size() == 2 && modelShape.size() == 2 &&
                       fileShape[1] == modelShape[1] &&
                       stringrt::positionTableLayout(fileShape[0]).side > 0 &&
                       stringrt::positionTableLayout(modelShape[0]).side > 0 &&
                       stringrt::positionTableLayout(fileShape[0]).special ==
                           stringrt::positionTableLayout(modelShape[0]).special;
    const std::string shapes =
        fmt::format("parameter '{}' is {} in the file and {} in the model", name,
                    shapeText(fileShape), shapeText(modelShape));
    if (!table)
      throw stringrt::Error(path, shapes + (resize ? ": not a position table of another grid "
                                                     "(--resize-positions resizes [1 + n*n, D] "
                                                     "or [n*n, D] tables only)"
                                                   : ""));
    if (!resize)
      throw stringrt::Error(path, shapes + ": a learned position table of another image size; "
                                           "--resize-positions resizes it (bicubic, as DeiT and "
                                           "timm do)");
    return stringrt::resizePositionTable(values, fileShape[0], fileShape[1], modelShape[0]);
  };
}

} // namespace stringrun
