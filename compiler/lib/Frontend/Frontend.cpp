//===- Frontend.cpp - .pe file to ModelGraph ------------------------------===//

#include "stringc/Frontend/Frontend.h"

#include "stringc/Frontend/Parser.h"
#include "stringc/Frontend/Analyzer.h"

#include <filesystem>

namespace stringc {

std::optional<ModelGraph> compileModel(const SourceManager &sources, DiagnosticEngine &diags,
                                       const std::string &baseDir,
                                       const std::vector<ConstantOverride> &overrides) {
  Parser parser(sources, diags);
  ast::Module module = parser.parseModule();
  // Analyze even after syntax errors: the statements that parsed are still
  // checked, so one run reports as much as it can.
  return analyzeModule(module, sources, diags, AnalyzerOptions{baseDir, overrides});
}

std::string modelBaseDir(const std::string &path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path absolute = fs::absolute(fs::path(path), ec);
  if (ec)
    absolute = fs::path(path);
  return absolute.parent_path().lexically_normal().string();
}

} // namespace stringc
