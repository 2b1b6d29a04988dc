//===- DiagnosticsTest.cpp ------------------------------------------------===//

#include "stringc/Frontend/Diagnostics.h"

#include <gtest/gtest.h>

#include <sstream>

using namespace stringc;

namespace {

std::string printed(const DiagnosticEngine &diags) {
  std::ostringstream os;
  diags.print(os);
  diags.printSummary(os);
  return os.str();
}

TEST(Diagnostics, CaretUnderTheRange) {
  SourceManager sources("m.pe", "model m\nlet h = linear(x, w1)\n");
  DiagnosticEngine diags(sources);
  diags.error({26, 28}, "bad weight");
  EXPECT_EQ(printed(diags), "m.pe:2:19: error: bad weight\n"
                            "let h = linear(x, w1)\n"
                            "                  ^~\n"
                            "1 error generated.\n");
}

TEST(Diagnostics, RangeIsClippedToItsLine) {
  SourceManager sources("m.pe", "ab\ncd\n");
  DiagnosticEngine diags(sources);
  diags.error({1, 5}, "spans lines");
  EXPECT_EQ(printed(diags), "m.pe:1:2: error: spans lines\nab\n ^\n1 error generated.\n");
}

TEST(Diagnostics, TabsAreKeptForAlignment) {
  SourceManager sources("m.pe", "\tlet x = y\n");
  DiagnosticEngine diags(sources);
  diags.error({9, 10}, "unknown name 'y'");
  EXPECT_EQ(printed(diags), "m.pe:1:10: error: unknown name 'y'\n\tlet x = y\n\t        ^\n1 error generated.\n");
}

TEST(Diagnostics, NotesAndInstantiationContexts) {
  SourceManager sources("m.pe", "a\nb\nc\n");
  DiagnosticEngine diags(sources);
  {
    DiagnosticContextGuard outer(diags, {4, 5}, "in instantiation of block 'outer' here");
    DiagnosticContextGuard inner(diags, {2, 3}, "in instantiation of block 'inner' here");
    diags.error({0, 1}, "oops", {DiagnosticEngine::note({4, 5}, "see this")});
  }
  diags.error({0, 1}, "later");
  ASSERT_EQ(diags.diagnostics().size(), 2u);
  const Diagnostic &first = diags.diagnostics()[0];
  ASSERT_EQ(first.notes.size(), 3u);
  EXPECT_EQ(first.notes[0].message, "see this");
  EXPECT_EQ(first.notes[1].message, "in instantiation of block 'inner' here");
  EXPECT_EQ(first.notes[2].message, "in instantiation of block 'outer' here");
  EXPECT_TRUE(diags.diagnostics()[1].notes.empty());
  EXPECT_EQ(printed(diags), "m.pe:1:1: error: oops\na\n^\n"
                            "m.pe:3:1: note: see this\nc\n^\n"
                            "m.pe:2:1: note: in instantiation of block 'inner' here\nb\n^\n"
                            "m.pe:3:1: note: in instantiation of block 'outer' here\nc\n^\n"
                            "m.pe:1:1: error: later\na\n^\n"
                            "2 errors generated.\n");
}

TEST(Diagnostics, SameErrorAtSamePlaceIsReportedOnce) {
  SourceManager sources("m.pe", "abc\n");
  DiagnosticEngine diags(sources);
  diags.error({0, 1}, "x");
  diags.error({0, 1}, "x");
  diags.error({0, 1}, "y");
  EXPECT_EQ(diags.errorCount(), 2u);
}

TEST(Diagnostics, ErrorLimit) {
  SourceManager sources("m.pe", "abc\n");
  DiagnosticEngine diags(sources);
  for (unsigned i = 0; i < DiagnosticEngine::kErrorLimit + 5; ++i)
    diags.error({0, 1}, "error " + std::to_string(i));
  EXPECT_TRUE(diags.shouldStop());
  EXPECT_EQ(diags.diagnostics().size(), DiagnosticEngine::kErrorLimit);
  std::string out = printed(diags);
  EXPECT_NE(out.find("m.pe: error: too many errors; stopped after the first 50\n50 errors generated.\n"),
            std::string::npos);
}

TEST(Diagnostics, ErrorAtEndOfFile) {
  SourceManager sources("m.pe", "model m\n");
  DiagnosticEngine diags(sources);
  diags.error({8, 8}, "at eof");
  EXPECT_EQ(printed(diags), "m.pe:2:1: error: at eof\n1 error generated.\n");
}

TEST(SourceManager, LinesAndColumns) {
  SourceManager sources("m.pe", "ab\r\ncd\n\nef");
  EXPECT_EQ(sources.lineCount(), 4u);
  EXPECT_EQ(sources.lineText(1), "ab");
  EXPECT_EQ(sources.lineText(2), "cd");
  EXPECT_EQ(sources.lineText(3), "");
  EXPECT_EQ(sources.lineText(4), "ef");
  SourceLoc loc = sources.location(5);
  EXPECT_EQ(loc.line, 2u);
  EXPECT_EQ(loc.col, 2u);
}

TEST(SourceManager, MissingFile) {
  std::string error;
  EXPECT_FALSE(SourceManager::fromFile("/nonexistent/dir/x.pe", error).has_value());
  EXPECT_EQ(error, "No such file or directory");
}

} // namespace
