// stringrun eval --resize-positions: the parameter adapter that lets a
// checkpoint trained at one image size load into a package compiled for
// another (stringrt::loadParameters' ParameterAdapter).
#pragma once

#include "stringrt/Checkpoint.h"

#include <string>

namespace stringrun {

// With `resize` true, a parameter of another shape that is a learned
// position table ([T, D] -> [T', D], T and T' a square grid after one class
// row or none: stringrt::positionTableLayout) is resized bicubically
// (stringrt::resizePositionTable); any other shape difference, and every one
// without `resize`, is an error naming the parameter, both shapes and the
// option.
stringrt::ParameterAdapter positionTableAdapter(const std::string &path, bool resize);

} // namespace stringrun
