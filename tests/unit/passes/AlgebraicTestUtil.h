//===- AlgebraicTestUtil.h - helpers of the algebraic pass tests -*- C++ -*-===//

#pragma once

#include "PassEquivalence.h"

#include <gtest/gtest.h>

#include <iostream>
#include <string>

namespace stringc::test {

/// How often `needle` occurs in `text`.
inline size_t countOf(const std::string &text, const std::string &needle) {
  size_t count = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1))
    ++count;
  return count;
}

/// Runs the case with and without `pass` and prints the errors (the figures
/// docs/passes.md quotes).
inline Comparison compareAlgebraic(PassCase c, const std::string &pass) {
  c.pass = pass;
  Comparison r = comparePass(c);
  std::cout << "[ errors   ] " << pass << " on " << (c.example.empty() ? "source" : c.example)
            << ": loss " << r.lossError << ", outputs " << r.outputError << ", gradients "
            << r.gradientError << " (" << r.worstGradient << ", " << r.gradientsCompared
            << " compared)\n";
  return r;
}

/// The tolerance of an exact rewrite: float32 rounding, relative to the
/// largest magnitude of each compared value (PassEquivalence.h).
inline constexpr double kRoundingTolerance = 1e-5;

} // namespace stringc::test
