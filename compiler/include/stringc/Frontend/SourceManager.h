//===- SourceManager.h - the text of a .pe file and its positions -*- C++ -*-===//
//
// A `.pe` model is one file. Tokens and AST nodes refer to it by byte ranges;
// the SourceManager turns those into 1-based line/column pairs and gives back
// the text of a line for diagnostics.
//
//===----------------------------------------------------------------------===//
#ifndef STRINGC_FRONTEND_SOURCEMANAGER_H
#define STRINGC_FRONTEND_SOURCEMANAGER_H

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace stringc {

/// Bytes [begin, end) of the source buffer.
struct SourceRange {
  uint32_t begin = 0;
  uint32_t end = 0;

  uint32_t length() const { return end - begin; }
  /// The smallest range covering both.
  static SourceRange cover(SourceRange a, SourceRange b) {
    return {a.begin < b.begin ? a.begin : b.begin, a.end > b.end ? a.end : b.end};
  }
  bool operator==(const SourceRange &other) const {
    return begin == other.begin && end == other.end;
  }
};

/// A 1-based line and column (in bytes); 0 means unknown.
struct SourceLoc {
  uint32_t line = 0;
  uint32_t col = 0;
};

class SourceManager {
public:
  /// `name` is how diagnostics refer to the file (the path as given).
  SourceManager(std::string name, std::string text);

  /// The largest model file read (offsets are 32-bit; models are a few KB).
  static constexpr size_t kMaxSourceBytes = size_t(16) << 20;

  /// Reads `path`. On failure returns nullopt and sets `error` to the system's
  /// reason ("No such file or directory") or says the file is too large.
  static std::optional<SourceManager> fromFile(const std::string &path, std::string &error);

  const std::string &name() const { return name_; }
  std::string_view text() const { return text_; }
  std::string_view slice(SourceRange range) const;

  SourceLoc location(uint32_t offset) const;
  /// The text of 1-based line `line`, without its line terminator.
  std::string_view lineText(uint32_t line) const;
  uint32_t lineCount() const { return static_cast<uint32_t>(lineStarts_.size()); }

private:
  std::string name_;
  std::string text_;
  std::vector<uint32_t> lineStarts_;
};

} // namespace stringc

#endif // STRINGC_FRONTEND_SOURCEMANAGER_H
