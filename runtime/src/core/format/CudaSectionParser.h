// The parser of a package's `cuda` section (parseCudaSection, CudaSection.h),
// private to src/core/format. Its JSON helpers are here; the section's top
// level, its kernel table, constants and coverage in CudaSection.cpp; its
// steps (launches, arguments, GEMMs), the values' storage types and the
// checks that tie steps, kernels and constants together in
// CudaSectionSteps.cpp; the checks of grouped GEMMs, bias-gradient epilogues
// and kernel groups in CudaSectionGroups.cpp. Every error is a stringrt::Error naming the package.
#ifndef STRINGRT_FORMAT_CUDASECTIONPARSER_H
#define STRINGRT_FORMAT_CUDASECTIONPARSER_H

#include "format/Json.h"
#include "stringrt/CudaSection.h"
#include "stringrt/Error.h"
#include "stringrt/Safetensors.h"

#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <initializer_list>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace stringrt::detail {

class CudaSectionParser {
public:
  CudaSectionParser(const SafetensorsFile &file, const Manifest &manifest, const std::string &path)
      : file(file), manifest(manifest), path(path) {}

  CudaSection parse(const std::string &json);

private:
  [[noreturn]] void fail(const std::string &message) const { throw Error(path, message); }

  const JsonValue &object(const JsonValue &value, const std::string &what,
                          const std::vector<const char *> &keys) const {
    if (value.kind != JsonValue::Kind::Object)
      fail(fmt::format("{} must be an object, got {}", what, detail::jsonKindName(value.kind)));
    std::set<std::string> seen;
    for (const detail::JsonMember &m : value.members) {
      bool known = false;
      for (const char *key : keys)
        known = known || m.key == key;
      if (!known)
        fail(fmt::format("{}: unknown key {}", what, quoteForMessage(m.key)));
      if (!seen.insert(m.key).second)
        fail(fmt::format("{}: duplicate key {}", what, quoteForMessage(m.key)));
    }
    for (const char *key : keys)
      if (!seen.count(key))
        fail(fmt::format("{}: missing key \"{}\"", what, key));
    return value;
  }

  static const JsonValue &member(const JsonValue &object, const char *key) {
    for (const detail::JsonMember &m : object.members)
      if (m.key == key)
        return m.value;
    throw std::logic_error("member checked by object()");
  }

  const JsonValue &array(const JsonValue &value, const std::string &what) const {
    if (value.kind != JsonValue::Kind::Array)
      fail(fmt::format("{} must be an array, got {}", what, detail::jsonKindName(value.kind)));
    return value;
  }

  std::string string(const JsonValue &value, const std::string &what) const {
    if (value.kind != JsonValue::Kind::String)
      fail(fmt::format("{} must be a string, got {}", what, detail::jsonKindName(value.kind)));
    return value.text;
  }

  int64_t integer(const JsonValue &value, const std::string &what, int64_t low,
                  int64_t high) const {
    std::optional<int64_t> number = value.kind == JsonValue::Kind::Number ? value.asInt64()
                                                                         : std::nullopt;
    if (!number || *number < low || *number > high)
      fail(fmt::format("{} must be an integer in [{}, {}]", what, low, high));
    return *number;
  }

  // [per_batch, constant]: per_batch within 2^31 and constant within 2^50,
  // so that at(batch) of any batch up to 2^31 fits an int64_t.
  CudaAffine affine(const JsonValue &value, const std::string &what, bool nonNegative) const {
    const int64_t perBatchLimit = int64_t(1) << 31, limit = int64_t(1) << 50;
    if (value.kind != JsonValue::Kind::Array || value.elements.size() != 2)
      fail(fmt::format("{} must be [per_batch, constant]", what));
    CudaAffine a;
    a.perBatch = integer(value.elements[0], what + "[0]", nonNegative ? 0 : -perBatchLimit,
                         perBatchLimit);
    a.constant = integer(value.elements[1], what + "[1]", nonNegative ? 0 : -limit, limit);
    return a;
  }

  float real(const JsonValue &value, const std::string &what) const {
    if (value.kind != JsonValue::Kind::Number)
      fail(fmt::format("{} must be a number", what));
    double number = std::strtod(value.text.c_str(), nullptr);
    if (!std::isfinite(number) || std::fabs(number) > 3.4e38)
      fail(fmt::format("{} must be a finite f32", what));
    return float(number);
  }

  // CudaSection.cpp: the kernel table, the constants, the coverage.
  std::vector<uint8_t> bytes(const std::string &tensor, const std::string &kernel) const;
  CudaKernel parseKernel(const JsonValue &entry);
  void parseConstants(const JsonValue &value, CudaSection &section);
  void parseCoverage(const JsonValue &value, CudaSection &section);

  // CudaSectionSteps.cpp: the steps and the checks across the section.
  static bool isFreeOp(const ProgramOp &op);
  CudaArg arg(const JsonValue &value, const std::string &what, const ProgramOp &op,
              size_t scratches) const;
  CudaArg pointerArg(const JsonValue &value, const std::string &what, const ProgramOp &op,
                     size_t scratches) const;
  CudaGemm gemm(const JsonValue &value, const std::string &what, const ProgramOp &op,
                size_t scratches) const;
  CudaLaunch launch(const JsonValue &value, const std::string &what, const ProgramOp &op,
                    size_t scratches, const CudaSection &section) const;
  void parseSteps(const JsonValue &value, CudaSection &section);
  void parseValueDTypes(const JsonValue &value, CudaSection &section);
  void checkGemmTypes(const CudaGemm &g, const CudaProgramSteps &steps, const CudaOpSteps &op,
                      size_t l) const;
  // CudaSectionGroups.cpp: the checks of entries that act together.
  void checkGemmGroups(const CudaSection &section) const;
  void checkKernelGroups(const CudaSection &section) const;
  void checkBiasGradients(const CudaSection &section) const;
  void checkUses(const CudaSection &section) const;
  void checkConstantsRead(const CudaSection &section) const;
  void checkBiasFallback(const CudaSection &section) const;
  std::string biasFallbackOf(const CudaProgramSteps &program, const CudaOpSteps &op,
                             const CudaGemm &g) const;

  const SafetensorsFile &file;
  const Manifest &manifest;
  const std::string &path;
  size_t constantCount = 0; // constants parsed (before the steps that read them)
};

} // namespace stringrt::detail

#endif // STRINGRT_FORMAT_CUDASECTIONPARSER_H
