//===- SourceManager.cpp --------------------------------------------------===//

#include "stringc/Frontend/SourceManager.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>

namespace stringc {

SourceManager::SourceManager(std::string name, std::string text)
    : name_(std::move(name)), text_(std::move(text)) {
  lineStarts_.push_back(0);
  for (uint32_t i = 0; i < text_.size(); ++i)
    if (text_[i] == '\n')
      lineStarts_.push_back(i + 1);
}

std::optional<SourceManager> SourceManager::fromFile(const std::string &path,
                                                     std::string &error) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    error = std::strerror(errno);
    return std::nullopt;
  }
  // Read at most one byte past the limit: an endless stream (/dev/zero, a
  // pipe) is refused without reading it all.
  std::string contents;
  char chunk[1 << 16];
  while (contents.size() <= kMaxSourceBytes) {
    in.read(chunk, sizeof chunk);
    contents.append(chunk, static_cast<size_t>(in.gcount()));
    if (!in)
      break;
  }
  if (in.bad()) {
    error = std::strerror(errno);
    return std::nullopt;
  }
  if (contents.size() > kMaxSourceBytes) {
    error = "larger than 16 MiB; a .pe model is a small text file";
    return std::nullopt;
  }
  return SourceManager(path, std::move(contents));
}

std::string_view SourceManager::slice(SourceRange range) const {
  uint32_t begin = std::min<uint32_t>(range.begin, static_cast<uint32_t>(text_.size()));
  uint32_t end = std::min<uint32_t>(std::max(range.end, begin), static_cast<uint32_t>(text_.size()));
  return std::string_view(text_).substr(begin, end - begin);
}

SourceLoc SourceManager::location(uint32_t offset) const {
  auto it = std::upper_bound(lineStarts_.begin(), lineStarts_.end(), offset);
  uint32_t line = static_cast<uint32_t>(it - lineStarts_.begin());
  return SourceLoc{line, offset - lineStarts_[line - 1] + 1};
}

std::string_view SourceManager::lineText(uint32_t line) const {
  if (line == 0 || line > lineStarts_.size())
    return {};
  uint32_t begin = lineStarts_[line - 1];
  uint32_t end = line < lineStarts_.size() ? lineStarts_[line] - 1
                                           : static_cast<uint32_t>(text_.size());
  if (end > begin && text_[end - 1] == '\r')
    --end;
  return std::string_view(text_).substr(begin, end - begin);
}

} // namespace stringc
