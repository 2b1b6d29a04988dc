// A typed, non-owning view of a host tensor: the element type (F32 or I32),
// a pointer to the row-major contiguous elements and the shape. Model::run
// and Model::gradients take their inputs as HostTensors (docs/package.md);
// the caller keeps the data alive for the duration of the call.
#pragma once

#include "stringrt/DType.h"
#include "stringrt/reference/Tensor.h"

#include <cstdint>
#include <vector>

namespace stringrt {

struct HostTensor {
  DType dtype = DType::F32;  // F32 or I32
  const void *data = nullptr; // numel() elements of dtype (may be null when numel() == 0)
  std::vector<int64_t> shape; // empty for a scalar

  HostTensor() = default;
  HostTensor(const float *values, std::vector<int64_t> shape)
      : dtype(DType::F32), data(values), shape(std::move(shape)) {}
  HostTensor(const int32_t *values, std::vector<int64_t> shape)
      : dtype(DType::I32), data(values), shape(std::move(shape)) {}

  // Views of an owned reference tensor (which must outlive the view).
  static HostTensor of(const ref::Tensor<float> &t) { return {t.values.data(), t.shape}; }
  static HostTensor of(const ref::Tensor<int32_t> &t) { return {t.values.data(), t.shape}; }

  int64_t numel() const { return ref::shapeNumel(shape); }
  const float *f32() const { return static_cast<const float *>(data); }
  const int32_t *i32() const { return static_cast<const int32_t *>(data); }
};

} // namespace stringrt
