//===- Diagnostics.cpp ----------------------------------------------------===//

#include "stringc/Frontend/Diagnostics.h"

#include <algorithm>

namespace stringc {

namespace {
/// The most characters of a source line a diagnostic shows.
constexpr size_t kMaxShownLine = 160;
} // namespace

void DiagnosticEngine::error(SourceRange range, std::string message,
                             std::vector<Diagnostic> notes) {
  // One report per place and message: a block instantiated for every layer
  // would otherwise repeat each error in its body once per layer.
  if (!seen_.insert({{range.begin, range.end}, message}).second)
    return;
  if (shouldStop())
    return;
  Diagnostic diag{Severity::Error, range, std::move(message), std::move(notes)};
  for (auto it = contexts_.rbegin(); it != contexts_.rend(); ++it)
    diag.notes.push_back(*it);
  diagnostics_.push_back(std::move(diag));
  ++errorCount_;
}

void DiagnosticEngine::pushContext(SourceRange range, std::string message) {
  contexts_.push_back(note(range, std::move(message)));
}

void DiagnosticEngine::popContext() { contexts_.pop_back(); }

void DiagnosticEngine::printOne(std::ostream &os, const Diagnostic &diag) const {
  SourceLoc loc = sources_.location(diag.range.begin);
  os << sources_.name() << ':' << loc.line << ':' << loc.col << ": "
     << (diag.severity == Severity::Error ? "error: " : "note: ") << diag.message << '\n';
  std::string_view line = sources_.lineText(loc.line);
  if (line.empty() && loc.col <= 1)
    return;
  // A very long line (generated input) is shown as a window around the
  // column, so one diagnostic stays a few lines long.
  size_t start = loc.col - 1;
  std::string prefix;
  if (line.size() > kMaxShownLine) {
    size_t from = start > kMaxShownLine / 2 ? start - kMaxShownLine / 2 : 0;
    from = std::min(from, line.size() - kMaxShownLine);
    if (from > 0)
      prefix = "...";
    line = line.substr(from, kMaxShownLine);
    start = start - from + prefix.size();
  }
  os << prefix << line << (line.size() == kMaxShownLine ? "..." : "") << '\n';
  std::string shown = prefix + std::string(line);
  // Keep tabs so the caret lines up under the token whatever the tab width.
  std::string caret;
  for (size_t i = 0; i < start && i < shown.size(); ++i)
    caret += shown[i] == '\t' ? '\t' : ' ';
  while (caret.size() < start)
    caret += ' ';
  caret += '^';
  size_t lineEndOffset = shown.size();
  size_t rangeLength = diag.range.length();
  size_t tildes = rangeLength > 1 ? std::min(rangeLength, lineEndOffset - std::min(start, lineEndOffset)) : 1;
  for (size_t i = 1; i < tildes; ++i)
    caret += '~';
  os << caret << '\n';
}

void DiagnosticEngine::print(std::ostream &os) const {
  // In source order: the lexer, the parser and the analyzer each run over
  // the whole file, so emission order would interleave them confusingly.
  std::vector<const Diagnostic *> ordered;
  for (const Diagnostic &diag : diagnostics_)
    ordered.push_back(&diag);
  std::stable_sort(ordered.begin(), ordered.end(), [](const Diagnostic *a, const Diagnostic *b) {
    return a->range.begin < b->range.begin;
  });
  for (const Diagnostic *diagPtr : ordered) {
    const Diagnostic &diag = *diagPtr;
    printOne(os, diag);
    for (const Diagnostic &note : diag.notes)
      printOne(os, note);
  }
  // The frontend stops analyzing at the limit, so there may be more errors
  // than were counted.
  if (shouldStop())
    os << sources_.name() << ": error: too many errors; stopped after the first " << kErrorLimit << "\n";
}

void DiagnosticEngine::printSummary(std::ostream &os) const {
  if (errorCount_ == 0)
    return;
  os << errorCount_ << (errorCount_ == 1 ? " error" : " errors") << " generated.\n";
}

} // namespace stringc
