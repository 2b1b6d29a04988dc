//===- TestHelpers.h - compiling .pe snippets in unit tests -----*- C++ -*-===//
#ifndef STRINGC_TESTS_UNIT_FRONTEND_TESTHELPERS_H
#define STRINGC_TESTS_UNIT_FRONTEND_TESTHELPERS_H

#include "stringc/Frontend/Diagnostics.h"
#include "stringc/Frontend/Frontend.h"
#include "stringc/Frontend/Graph.h"

#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace stringc::test {

/// The result of compiling one source text.
struct Compiled {
  std::unique_ptr<SourceManager> sources;
  std::unique_ptr<DiagnosticEngine> diags;
  std::optional<ModelGraph> graph;

  /// Each error as "LINE:COL: message".
  std::vector<std::string> errors() const {
    std::vector<std::string> out;
    for (const Diagnostic &d : diags->diagnostics()) {
      SourceLoc loc = sources->location(d.range.begin);
      out.push_back(std::to_string(loc.line) + ":" + std::to_string(loc.col) + ": " + d.message);
    }
    return out;
  }
  /// Everything the driver would print on stderr.
  std::string printed() const {
    std::ostringstream os;
    diags->print(os);
    return os.str();
  }
  std::string firstError() const {
    auto all = errors();
    return all.empty() ? std::string("<no error>") : all.front();
  }
};

inline Compiled compileSource(const std::string &text, const std::string &baseDir = ".") {
  Compiled result;
  result.sources = std::make_unique<SourceManager>("test.pe", text);
  result.diags = std::make_unique<DiagnosticEngine>(*result.sources);
  result.graph = compileModel(*result.sources, *result.diags, baseDir);
  return result;
}

/// A complete model around `body`: inputs x f32[B, 16, 64], ids i32[B, 16],
/// label i32[B], img f32[B, 1, 28, 28]; a loss and an optimizer. The body
/// starts on line 8.
inline std::string withModel(const std::string &body) {
  return "model t\n"
         "const D = 64\n"
         "input x: f32[B, 16, 64]\n"
         "input ids: i32[B, 16]\n"
         "input label: i32[B]\n"
         "input img: f32[B, 1, 28, 28]\n"
         "optimizer sgd(lr = 0.1)\n" +
         body + "\nloss mean(x)\n";
}

inline Compiled compileBody(const std::string &body, const std::string &baseDir = ".") {
  return compileSource(withModel(body), baseDir);
}

/// The op that produced output `name`.
inline const GraphOp &outputOp(const ModelGraph &graph, const std::string &name) {
  for (const GraphOutput &output : graph.outputs)
    if (output.name == name) {
      const GraphOp *op = graph.definingOp(output.valueId);
      if (!op)
        throw std::runtime_error("output " + name + " is an input");
      return *op;
    }
  throw std::runtime_error("no output " + name);
}

inline int64_t intAttr(const GraphOp &op, const std::string &name) {
  return std::get<int64_t>(*op.attr(name));
}
inline double floatAttr(const GraphOp &op, const std::string &name) {
  return std::get<double>(*op.attr(name));
}
inline std::string enumAttr(const GraphOp &op, const std::string &name) {
  return std::get<EnumValue>(*op.attr(name)).name;
}

/// Counts the ops named `name`.
inline size_t countOps(const ModelGraph &graph, const std::string &name) {
  size_t n = 0;
  for (const GraphOp &op : graph.ops)
    n += op.name == name;
  return n;
}

constexpr int64_t B = kBatchDim;

} // namespace stringc::test

/// Asserts that compilation succeeded, printing the diagnostics otherwise.
#define ASSERT_COMPILES(c) ASSERT_TRUE((c).graph.has_value()) << (c).printed()

#endif // STRINGC_TESTS_UNIT_FRONTEND_TESTHELPERS_H
