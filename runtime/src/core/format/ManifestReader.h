// Reading a package manifest's JSON (Manifest.cpp: the manifest and its
// sections; ManifestPrograms.cpp: the programs and their ops): where a value
// is, for messages, and typed access that fails with the manifest's path
// and that location. Private to the runtime.
#pragma once

#include "stringrt/Manifest.h"
#include "stringrt/ManifestLimits.h"

#include "format/Json.h"
#include "stringrt/Error.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <charconv>
#include <cmath>
#include <limits>
#include <string>
#include <unordered_map>
#include <vector>

namespace stringrt::detail {

// kMaxRank, kMaxDim, kMaxParamElements and kMaxExampleElements (every
// shape's elements but the batch: times a batch <= 2^31, every size fits an
// int64_t): ManifestLimits.h, shared with the compiler, which refuses models
// beyond them.

template <typename T> std::string shapeText(const std::vector<T> &shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

// The numbers of a JSON array as written, for a message.
inline std::vector<std::string> jsonInts(const JsonValue &array) {
  std::vector<std::string> texts;
  for (const JsonValue &e : array.elements)
    texts.push_back(e.text);
  return texts;
}

// The values an integer attribute (or each element of an integer array
// attribute) may take, by name: sizes and counts in [1, 2^31], indices and
// offsets within 2^31 (what any shape allows), an axis within the rank
// limit; a seed is any 64-bit integer. Bounded values keep every product and
// difference a kernel computes with them inside int64_t.
inline std::pair<int64_t, int64_t> intAttrRange(std::string_view name) {
  if (name == "patch" || name == "heads" || name == "size" || name == "length" ||
      name == "rows" || name == "cols" || name == "dim")
    return {1, kMaxDim};
  if (name == "index" || name == "special" || name == "skip_base" || name == "support")
    return {0, kMaxDim};
  if (name == "axis")
    return {0, int64_t(kMaxRank)};
  if (name == "offsets")
    return {-kMaxDim, kMaxDim};
  return {std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()};
}

inline const char *dtypeKeyword(DType dtype) {
  return dtype == DType::I32 ? "i32" : "f32";
}

// Where a JSON value is in the manifest ("manifest.programs.forward.ops[3]
// (pe.relu).operands[1]"), for messages: a string, or a function that builds
// one, called only when a message needs it (building a location for every
// value and op made loading a package of 200,000 parameters slow). It
// refers to its string or function: pass it down, never keep it.
class Where {
public:
  Where(const std::string &text) : text_(&text) {}
  Where(const char *literal) : literal_(literal) {}
  template <typename Build,
            typename = decltype(std::string(std::declval<const Build &>()()))>
  Where(const Build &build)
      : build_(&build), call_([](const void *b) {
          return (*static_cast<const Build *>(b))();
        }) {}

  std::string str() const {
    return text_ ? *text_ : literal_ ? std::string(literal_) : call_(build_);
  }

private:
  const std::string *text_ = nullptr;
  const char *literal_ = nullptr;
  const void *build_ = nullptr;
  std::string (*call_)(const void *) = nullptr;
};

// The manifest's JSON, read with a location path for messages:
// "params[2].shape[1]". Every failure throws Error(path, location: what).
class ManifestReader {
public:
  explicit ManifestReader(const std::string &path) : path_(path) {}

  [[noreturn]] void fail(const std::string &what) const {
    throw Error(path_, what);
  }
  [[noreturn]] void fail(const Where &where, const std::string &what) const {
    throw Error(path_, where.str() + ": " + what);
  }

  // --- JSON access -------------------------------------------------------

  void expectKind(const JsonValue &value, JsonValue::Kind kind,
                  const Where &where) const {
    if (value.kind != kind)
      fail(where, fmt::format("expected {}, got {}", detail::jsonKindName(kind),
                              detail::jsonKindName(value.kind)));
  }

  // Checks that `object` is an object whose keys are all in `allowed`,
  // unique, and include every key of `required`.
  // (A bit per allowed key: no allocation per object.)
  void checkKeys(const JsonValue &object, const Where &where,
                 std::initializer_list<const char *> allowed,
                 std::initializer_list<const char *> required) const {
    expectKind(object, JsonValue::Kind::Object, where);
    uint64_t seen = 0;
    for (const JsonMember &m : object.members) {
      size_t index = 0;
      for (const char *key : allowed) {
        if (m.key == key)
          break;
        ++index;
      }
      if (index == allowed.size())
        fail(where, fmt::format("unknown key {}", quoteForMessage(m.key)));
      if (seen & (uint64_t(1) << index))
        fail(where, fmt::format("duplicate key {}", quoteForMessage(m.key)));
      seen |= uint64_t(1) << index;
    }
    for (const char *key : required)
      if (!member(object, key))
        fail(where, fmt::format("missing key \"{}\"", key));
  }

  static const JsonValue *member(const JsonValue &object,
                                 std::string_view key) {
    for (const JsonMember &m : object.members)
      if (m.key == key)
        return &m.value;
    return nullptr;
  }

  std::string getString(const JsonValue &value,
                        const Where &where) const {
    expectKind(value, JsonValue::Kind::String, where);
    return value.text;
  }
  bool getBool(const JsonValue &value, const Where &where) const {
    expectKind(value, JsonValue::Kind::Bool, where);
    return value.boolean;
  }
  int64_t getInt(const JsonValue &value, const Where &where) const {
    expectKind(value, JsonValue::Kind::Number, where);
    std::optional<int64_t> result = value.asInt64();
    if (!result)
      fail(where, fmt::format("expected a 64-bit integer, got {}",
                              value.text));
    return *result;
  }
  uint64_t getUInt(const JsonValue &value, const Where &where) const {
    expectKind(value, JsonValue::Kind::Number, where);
    std::optional<uint64_t> result = value.asUInt64();
    if (!result)
      fail(where, fmt::format("expected an unsigned 64-bit integer, got {}",
                              value.text));
    return *result;
  }
  double getDouble(const JsonValue &value, const Where &where) const {
    expectKind(value, JsonValue::Kind::Number, where);
    double result = 0.0;
    const char *begin = value.text.data();
    const char *end = begin + value.text.size();
    auto [ptr, ec] = std::from_chars(begin, end, result);
    if (ec != std::errc() || ptr != end || !std::isfinite(result))
      fail(where, fmt::format("number {} is out of range", value.text));
    return result;
  }
  // An integer attribute's value, in the range its name allows.
  int64_t getAttrInt(const JsonValue &value, std::string_view name,
                     const Where &where) const {
    const int64_t v = getInt(value, where);
    const auto [low, high] = intAttrRange(name);
    if (v < low || v > high)
      fail(where, fmt::format("{} is out of range [{}, {}]", v, low, high));
    return v;
  }
  ValueId getId(const JsonValue &value, size_t valueCount,
                const Where &where) const {
    int64_t id = getInt(value, where);
    if (id < 0 || uint64_t(id) >= valueCount)
      fail(where, fmt::format("value id {} out of range (the program has {} "
                              "values)",
                              id, valueCount));
    return ValueId(id);
  }

  std::vector<int64_t> getShape(const JsonValue &value, const Where &where,
                                bool allowBatch) const {
    expectKind(value, JsonValue::Kind::Array, where);
    if (value.elements.size() > kMaxRank)
      fail(where, fmt::format("rank {} exceeds the limit {}",
                              value.elements.size(), kMaxRank));
    std::vector<int64_t> shape;
    int batchDims = 0;
    int64_t elements = 1; // of the dimensions but the batch
    for (size_t i = 0; i < value.elements.size(); ++i) {
      auto at = [&] { return fmt::format("{}[{}]", where.str(), i); };
      int64_t dim = getInt(value.elements[i], at);
      if (dim == kBatchDim && allowBatch) {
        if (++batchDims > 1)
          fail(where, "more than one batch dimension (-1)");
      } else if (dim < 1 || dim > kMaxDim) {
        fail(at, fmt::format("dimension {} out of range [1, {}]{}", dim,
                             kMaxDim, allowBatch ? " (or -1, the batch)" : ""));
      } else {
        // Dimensions <= 2^31 and the running product <= 2^32: no overflow.
        elements *= dim;
        if (elements > kMaxExampleElements)
          fail(where, fmt::format("{} has more than {} elements{}",
                                  shapeText(jsonInts(value)), kMaxExampleElements,
                                  allowBatch ? " (besides the batch)" : ""));
      }
      shape.push_back(dim);
    }
    return shape;
  }

  DType getDType(const JsonValue &value, const Where &where) const {
    std::string name = getString(value, where);
    if (name == "f32")
      return DType::F32;
    if (name == "i32")
      return DType::I32;
    fail(where, fmt::format("unknown dtype {} (expected f32 or i32)",
                            quoteForMessage(name)));
  }

private:
  const std::string &path_;
};

// The parameters of a manifest by name.
using ParamIndex = std::unordered_map<std::string, size_t>;

// ManifestPrograms.cpp: the program `name` ("forward", "gradients") of the
// manifest, its values, inputs, ops (operand and result counts, dtypes,
// attributes, kernels), outputs and arena plan, checked against `manifest`'s
// inputs and parameters.
Program parseProgram(const ManifestReader &reader, const JsonValue &value,
                     const std::string &name, const Manifest &manifest,
                     const ParamIndex &paramIndex);
// The outputs across programs: the forward program has no gradients, the
// gradients program the loss and one gradient per trainable parameter.
void checkProgramOutputs(const ManifestReader &reader, const Manifest &manifest);

} // namespace stringrt::detail
