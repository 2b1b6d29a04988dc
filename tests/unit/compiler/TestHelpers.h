//===- TestHelpers.h - Helpers shared by the compiler unit tests ----------===//
//
// The examples (examples/*.pe, found through STRINGC_EXAMPLES_DIR) and their
// compilation through the frontend to a model graph.
//
//===----------------------------------------------------------------------===//

#pragma once

#include "stringc/Frontend/Frontend.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace stringc::test {

/// The file names of the examples, sorted.
inline std::vector<std::string> exampleFiles() {
  std::vector<std::string> files;
  for (const auto &entry : std::filesystem::directory_iterator(STRINGC_EXAMPLES_DIR))
    if (entry.path().extension() == ".pe")
      files.push_back(entry.path().filename().string());
  std::sort(files.begin(), files.end());
  return files;
}

/// The model graph of example `file`; a test failure (the read error or the
/// diagnostics) and nullopt when it does not compile.
inline std::optional<ModelGraph> compileExample(const std::string &file) {
  std::string path = std::string(STRINGC_EXAMPLES_DIR) + "/" + file;
  std::string readError;
  std::optional<SourceManager> sources = SourceManager::fromFile(path, readError);
  if (!sources) {
    ADD_FAILURE() << "cannot read " << path << ": " << readError;
    return std::nullopt;
  }
  DiagnosticEngine diags(*sources);
  std::optional<ModelGraph> graph = compileModel(*sources, diags, modelBaseDir(path));
  if (!graph) {
    std::ostringstream printed;
    diags.print(printed);
    ADD_FAILURE() << file << " does not compile:\n" << printed.str();
  }
  return graph;
}

} // namespace stringc::test
