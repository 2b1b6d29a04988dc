// Opening a CUDA library with dlopen and resolving its table of entry points
// (DriverApi.cpp, Blas.cpp, BlasLt.cpp). Nothing here knows CUDA: each caller
// names its library candidates, its symbols and the words of its errors.
#pragma once

#include "stringrt/Error.h"

#include <string>
#include <string_view>
#include <vector>

namespace stringrt::cuda {

// What loading a table of entry points produced: the table, or why not.
template <typename Api> struct LoadedApi {
  Api api{};
  bool ok = false;
  std::string why;

  // The table, or nullptr with the reason in *whyNot (when given).
  const Api *get(std::string *whyNot) const {
    if (ok)
      return &api;
    if (whyNot)
      *whyNot = why;
    return nullptr;
  }

  // The table, or an Error "<what> is not available: <why>".
  const Api &require(std::string_view what) const {
    if (!ok)
      throw Error(std::string(what) + " is not available: " + why);
    return api;
  }
};

// Opens the first of `names` that dlopen loads (RTLD_NOW | RTLD_LOCAL).
// Returns nullptr when none does; then `errors` holds each one's dlerror
// (which names the library), joined by "; ".
void *openFirstLibrary(const std::vector<std::string> &names, std::string &errors);

// Fills function-pointer slots from an opened library. A symbol it cannot
// find leaves its slot null; the first such symbol is kept for the message.
class SymbolResolver {
public:
  explicit SymbolResolver(void *library) : library_(library) {}

  template <typename Function> void operator()(Function *&slot, const char *symbol) {
    slot = reinterpret_cast<Function *>(find(symbol));
  }

  // The first symbol not found, or nullptr when all were.
  const char *firstMissing() const { return firstMissing_; }

private:
  void *find(const char *symbol);

  void *library_;
  const char *firstMissing_ = nullptr;
};

} // namespace stringrt::cuda
