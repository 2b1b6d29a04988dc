// The one exception type the runtime throws for bad input and failed I/O.
#pragma once

#include <stdexcept>
#include <string>

namespace stringrt {

// what() is "<path>: <what is wrong>" when the error concerns a file, so a user
// can always tell which file to look at; otherwise just the message.
class Error : public std::runtime_error {
public:
  explicit Error(const std::string &message) : std::runtime_error(message) {}
  Error(const std::string &path, const std::string &message)
      : std::runtime_error(path + ": " + message), path_(path) {}

  // The file the error is about; empty when there is none.
  const std::string &path() const { return path_; }

private:
  std::string path_;
};

} // namespace stringrt
