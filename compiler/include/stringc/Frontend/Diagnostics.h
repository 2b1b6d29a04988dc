//===- Diagnostics.h - errors and notes with source carets ------*- C++ -*-===//
//
// Every stage of the frontend reports problems here and keeps going. A
// diagnostic prints as
//
//   model.pe:7:12: error: linear: input has 64 features but weight 'w1' ...
//     let h = linear(x, w1, b1)
//                       ^~
//   model.pe:20:11: note: in instantiation of block 'encoder' here
//   ...
//
// Errors raised while a block is being instantiated carry one note per
// enclosing instantiation (innermost first). The same error at the same place
// is reported once, however many instantiations reach it.
//
//===----------------------------------------------------------------------===//
#ifndef STRINGC_FRONTEND_DIAGNOSTICS_H
#define STRINGC_FRONTEND_DIAGNOSTICS_H

#include "stringc/Frontend/SourceManager.h"

#include <ostream>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace stringc {

enum class Severity { Error, Note };

struct Diagnostic {
  Severity severity = Severity::Error;
  SourceRange range;
  std::string message;
  std::vector<Diagnostic> notes;
};

class DiagnosticEngine {
public:
  /// After this many errors the engine records no more and `shouldStop()`
  /// turns true, so a pathological file cannot flood the terminal.
  static constexpr unsigned kErrorLimit = 50;

  explicit DiagnosticEngine(const SourceManager &sources) : sources_(sources) {}

  /// Records an error at `range`, followed by `notes` and then the notes of the
  /// active instantiation contexts.
  void error(SourceRange range, std::string message, std::vector<Diagnostic> notes = {});
  static Diagnostic note(SourceRange range, std::string message) {
    return Diagnostic{Severity::Note, range, std::move(message), {}};
  }

  /// While a context is active every error gets the note `message` at `range`.
  void pushContext(SourceRange range, std::string message);
  void popContext();

  unsigned errorCount() const { return errorCount_; }
  bool hasErrors() const { return errorCount_ > 0; }
  bool shouldStop() const { return errorCount_ >= kErrorLimit; }
  /// In the order they were reported.
  const std::vector<Diagnostic> &diagnostics() const { return diagnostics_; }

  /// Prints every diagnostic with its source line and caret, in source order
  /// (each error followed by its notes).
  void print(std::ostream &os) const;
  /// "1 error generated." / "3 errors generated." (nothing when there are none).
  void printSummary(std::ostream &os) const;

  const SourceManager &sources() const { return sources_; }

private:
  void printOne(std::ostream &os, const Diagnostic &diag) const;

  const SourceManager &sources_;
  std::vector<Diagnostic> diagnostics_;
  std::vector<Diagnostic> contexts_;
  std::set<std::pair<std::pair<uint32_t, uint32_t>, std::string>> seen_;
  unsigned errorCount_ = 0;
};

/// Restores the instantiation context stack when it goes out of scope.
class DiagnosticContextGuard {
public:
  DiagnosticContextGuard(DiagnosticEngine &diags, SourceRange range, std::string message)
      : diags_(diags) {
    diags_.pushContext(range, std::move(message));
  }
  ~DiagnosticContextGuard() { diags_.popContext(); }
  DiagnosticContextGuard(const DiagnosticContextGuard &) = delete;
  DiagnosticContextGuard &operator=(const DiagnosticContextGuard &) = delete;

private:
  DiagnosticEngine &diags_;
};

} // namespace stringc

#endif // STRINGC_FRONTEND_DIAGNOSTICS_H
