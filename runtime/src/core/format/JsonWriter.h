// A minimal JSON writer for the package format's writers (ManifestWriter.cpp,
// CudaSectionWriter.cpp): it places commas and escapes strings; the structure
// is the caller's. Numbers are written so that the readers (Json.h) get the
// same value back: integers exactly, doubles as the shortest text that reads
// back as the same double, always with a fraction or exponent.
#pragma once

#include "stringrt/Error.h"
#include "stringrt/JsonText.h"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace stringrt::detail {

class JsonWriter {
public:
  const std::string &str() const { return out_; }
  std::string take() { return std::move(out_); }

  void beginObject() { open('{'); }
  void endObject() { close('}'); }
  void beginArray() { open('['); }
  void endArray() { close(']'); }

  // The next value is this member's.
  void key(std::string_view name) {
    separate();
    appendString(name);
    out_ += ':';
    afterKey_ = true;
  }

  // `text` must be valid UTF-8: a package cannot hold anything else.
  void value(std::string_view text) {
    separate();
    appendString(text);
  }
  void value(const char *text) { value(std::string_view(text)); }
  void value(const std::string &text) { value(std::string_view(text)); }
  void value(bool flag) {
    separate();
    out_ += flag ? "true" : "false";
  }
  void value(int64_t number) {
    separate();
    out_ += std::to_string(number);
  }
  void value(uint64_t number) {
    separate();
    out_ += std::to_string(number);
  }
  void value(int number) { value(int64_t(number)); }
  // `number` must be finite (JSON has no NaN or infinity).
  void value(double number) {
    if (!std::isfinite(number))
      throw Error("JSON writer: a number is not finite");
    separate();
    char buffer[64];
    auto result = std::to_chars(buffer, buffer + sizeof buffer, number);
    std::string_view text(buffer, size_t(result.ptr - buffer));
    out_ += text;
    if (text.find_first_of(".e") == std::string_view::npos)
      out_ += ".0";
  }
  void value(const std::vector<int64_t> &numbers) {
    beginArray();
    for (int64_t n : numbers)
      value(n);
    endArray();
  }

  // A number the caller has formatted (e.g. an f32 in 9 digits).
  void raw(std::string_view numberText) {
    separate();
    out_ += numberText;
  }

  template <typename T> void member(std::string_view name, const T &v) {
    key(name);
    value(v);
  }

private:
  void open(char bracket) {
    separate();
    out_ += bracket;
    first_.push_back(true);
  }
  void close(char bracket) {
    first_.pop_back();
    out_ += bracket;
  }
  void separate() {
    if (afterKey_) {
      afterKey_ = false;
      return;
    }
    if (!first_.empty()) {
      if (!first_.back())
        out_ += ',';
      first_.back() = false;
    }
  }
  void appendString(std::string_view text) {
    if (!isValidUtf8(text))
      throw Error("JSON writer: a string is not valid UTF-8");
    appendJsonString(out_, text);
  }

  std::string out_;
  std::vector<bool> first_;
  bool afterKey_ = false;
};

} // namespace stringrt::detail
