// The training log (TrainLog.h).
#include "training/TrainLog.h"

#include "format/AtomicFileWriter.h"
#include "stringrt/Error.h"

#include <fmt/format.h>

#include <charconv>
#include <filesystem>
#include <sstream>

namespace stringrt::detail {

namespace {

// The step of a row ("train,12,..."); nullopt when it has none.
std::optional<int64_t> rowStep(const std::string &row) {
  const size_t first = row.find(',');
  if (first == std::string::npos)
    return std::nullopt;
  const size_t second = row.find(',', first + 1);
  const char *begin = row.data() + first + 1;
  const char *end = row.data() + (second == std::string::npos ? row.size() : second);
  int64_t step = 0;
  auto [ptr, ec] = std::from_chars(begin, end, step);
  if (ec != std::errc() || ptr != end || begin == end)
    return std::nullopt;
  return step;
}

// Drops the rows of steps beyond `resumeStep` from the log at `path` (and a
// torn last line, which a killed writer can leave).
void dropRowsAfter(const std::string &path, int64_t resumeStep) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw Error(path, "cannot read the log");
  std::stringstream whole;
  whole << in.rdbuf();
  const std::string text = whole.str();
  if (text.empty())
    return;
  std::string kept;
  bool dropped = false;
  size_t at = 0;
  for (int64_t number = 1; at < text.size(); ++number) {
    const size_t newline = text.find('\n', at);
    if (newline == std::string::npos) { // a torn last line
      dropped = true;
      break;
    }
    const std::string row = text.substr(at, newline - at);
    at = newline + 1;
    if (number == 1) {
      if (row != kTrainLogHeader)
        throw Error(path, fmt::format("is not a training log (its first line is not \"{}\"): "
                                      "resuming would rewrite it; give another --log",
                                      kTrainLogHeader));
    } else {
      std::optional<int64_t> step = rowStep(row);
      if (!step)
        throw Error(path, fmt::format("line {} of the log has no step: resuming would rewrite "
                                      "it; give another --log",
                                      number));
      if (*step > resumeStep) {
        dropped = true;
        continue;
      }
    }
    kept += row + '\n';
  }
  if (!dropped)
    return;
  AtomicFileWriter writer(path);
  writer.write(kept.data(), kept.size());
  writer.commit();
}

} // namespace

TrainLog::TrainLog(const std::string &path, std::optional<int64_t> resumeStep) : path_(path) {
  if (path.empty())
    return;
  std::error_code error;
  const bool exists = std::filesystem::exists(path, error);
  const bool append = resumeStep && exists && std::filesystem::file_size(path, error) > 0 && !error;
  if (append)
    dropRowsAfter(path, *resumeStep);
  out_.open(path, append ? std::ios::app : std::ios::trunc);
  if (!out_)
    throw Error(path, "cannot open the log for writing");
  if (!append)
    line(kTrainLogHeader);
}

void TrainLog::line(const std::string &text) {
  if (path_.empty())
    return;
  out_ << text << '\n';
  out_.flush();
  if (!out_)
    throw Error(path_, "cannot write the log");
}

} // namespace stringrt::detail
