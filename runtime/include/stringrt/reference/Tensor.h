// Minimal dense row-major tensors for the reference (CPU, plain-loop) kernels.
//
// TensorRef<T> is a non-owning view: a pointer plus a shape, row-major and
// contiguous. Kernels take inputs as TensorRef<const T> and outputs as
// TensorRef<T>. Tensor<T> owns its values (used by tests and callers).
#pragma once

#include "stringrt/Error.h"

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace stringrt::ref {

// Number of elements of a shape (1 for a scalar, shape {}).
inline int64_t shapeNumel(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

// "[2, 3, 4]"
inline std::string shapeToString(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i)
      s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

template <typename T> struct TensorRef {
  T *data = nullptr;
  std::vector<int64_t> shape;

  int64_t numel() const { return shapeNumel(shape); }
  int64_t rank() const { return static_cast<int64_t>(shape.size()); }

  // Extent of dimension i; a negative i counts from the end (-1 = last).
  // Throws stringrt::Error when i is out of range.
  int64_t dim(int i) const {
    int r = static_cast<int>(shape.size());
    int k = i < 0 ? i + r : i;
    if (k < 0 || k >= r)
      throw Error("dimension " + std::to_string(i) + " out of range for shape " +
                  shapeToString(shape));
    return shape[static_cast<size_t>(k)];
  }

  T &operator[](int64_t i) const { return data[i]; }

  // A mutable view converts to a const view.
  operator TensorRef<const T>() const { return TensorRef<const T>{data, shape}; }
};

template <typename T> struct Tensor {
  std::vector<T> values;
  std::vector<int64_t> shape;

  Tensor() = default;
  Tensor(std::vector<int64_t> s, std::vector<T> v)
      : values(std::move(v)), shape(std::move(s)) {
    if (static_cast<int64_t>(values.size()) != shapeNumel(shape))
      throw Error("tensor of shape " + shapeToString(shape) + " given " +
                  std::to_string(values.size()) + " values");
  }

  int64_t numel() const { return static_cast<int64_t>(values.size()); }

  TensorRef<T> ref() { return TensorRef<T>{values.data(), shape}; }
  TensorRef<const T> cref() const { return TensorRef<const T>{values.data(), shape}; }

  static Tensor zeros(std::vector<int64_t> shape) {
    Tensor t;
    t.values.assign(static_cast<size_t>(shapeNumel(shape)), T(0));
    t.shape = std::move(shape);
    return t;
  }
};

namespace detail {
template <typename T> struct NonDeduced { using type = T; };
} // namespace detail

// An optional operand / result of a kernel; T is not deduced from it, so
// std::nullopt can be passed directly.
template <typename T>
using OptionalInput = std::optional<TensorRef<const typename detail::NonDeduced<T>::type>>;
template <typename T>
using OptionalOutput = std::optional<TensorRef<typename detail::NonDeduced<T>::type>>;

// Throws stringrt::Error "<what>: expected shape [..], got [..]" unless
// `t.shape == expected`.
template <typename T>
void checkShape(const char *what, const TensorRef<T> &t,
                const std::vector<int64_t> &expected) {
  if (t.shape != expected)
    throw Error(std::string(what) + ": expected shape " + shapeToString(expected) +
                ", got " + shapeToString(t.shape));
}

// Throws stringrt::Error unless t has the given rank.
template <typename T>
void checkRank(const char *what, const TensorRef<T> &t, int64_t rank) {
  if (t.rank() != rank)
    throw Error(std::string(what) + ": expected rank " + std::to_string(rank) +
                ", got shape " + shapeToString(t.shape));
}

// Throws stringrt::Error with `message` (prefixed by `what`) unless cond.
inline void check(bool cond, const char *what, const std::string &message) {
  if (!cond)
    throw Error(std::string(what) + ": " + message);
}

} // namespace stringrt::ref
