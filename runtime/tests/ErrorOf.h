// The message of the stringrt::Error an action throws, for tests that compare
// a refusal's whole message (TestFiles.h's failsWith checks an error about a
// file instead).
#pragma once

#include "stringrt/Error.h"

#include <string>

namespace stringrt::test {

// The message of the Error `f` throws ("" when it throws none; any other
// exception passes through).
template <typename F> std::string errorOf(F f) {
  try {
    f();
  } catch (const Error &e) {
    return e.what();
  }
  return "";
}

} // namespace stringrt::test
