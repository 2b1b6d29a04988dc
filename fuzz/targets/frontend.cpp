// Fuzz target: .pe source text through the frontend, the path
// `stringc --emit=mlir` takes before MLIR: lex, parse, check, build the
// ModelGraph (compileModel), then print the diagnostics and the graph as the
// driver would. Any crash, sanitizer report or uncaught exception is a
// finding, and so is a result without a graph and without an error (stringc
// would exit 1 saying nothing).
#include "stringc/Frontend/Diagnostics.h"
#include "stringc/Frontend/Frontend.h"
#include "stringc/Frontend/Graph.h"
#include "stringc/Frontend/SourceManager.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  stringc::SourceManager sources("fuzz.pe", std::string(reinterpret_cast<const char *>(data), size));
  stringc::DiagnosticEngine diags(sources);
  std::optional<stringc::ModelGraph> graph =
      stringc::compileModel(sources, diags, STRINGC_FUZZ_FRONTEND_BASE_DIR);
  std::ostringstream sink;
  diags.print(sink);
  diags.printSummary(sink);
  if (graph)
    stringc::printGraph(*graph, sink);
  if (graph.has_value() == diags.hasErrors()) {
    std::fprintf(stderr, "compileModel returned %s with %u errors\n",
                 graph ? "a graph" : "no graph", diags.errorCount());
    std::abort();
  }
  return 0;
}
