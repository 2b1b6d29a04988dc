//===- PassEquivalence.h - a model with and without a pass ----------------===//
//
// The test every rewrite pass must pass (docs/passes.md): compile a model
// twice, with the default pipeline and with one pass switched off, run both
// packages in the runtime on the same parameters and the same batch, and
// compare the loss, every output and every parameter gradient. The two train
// modules must also differ (the pass fired), or be equal where a test says
// the pass must not fire.
//
//   PassCase c;
//   c.example = "vit_polar.pe";      // or c.source = "<.pe text>"
//   c.pass = "pe-spd-gate-square";
//   Comparison r = comparePass(c);
//   EXPECT_TRUE(r.modulesDiffer);
//   EXPECT_LE(r.maxError(), 1e-5);
//
//===----------------------------------------------------------------------===//

#pragma once

#include "stringc/Driver/Driver.h"
#include "stringrt/KernelSet.h"

#include <cstdint>
#include <map>
#include <string>

namespace stringc::test {

struct PassCase {
  std::string example;  // a file of examples/ (e.g. "vit_rope.pe"), or
  std::string source;   // the text of a .pe model (when example is empty)
  std::string pass;     // the pass switched off in the second compilation
                        // (an opt-in pass: switched on in the first)
  CompileOptions base;  // options of both compilations (e.g. approximate)
  int64_t batch = 2;
  uint64_t seed = 1;    // of the random inputs
  stringrt::KernelSet kernels = stringrt::KernelSet::Reference;
};

struct Comparison {
  // Each error is max |with - without| / max(max |without|, 1e-6) over the
  // elements of one value; these are the largest over the values.
  double lossError = 0;
  double outputError = 0;
  double gradientError = 0;
  std::string worstGradient; // the parameter with the largest gradientError
  // Per parameter: its gradientError, and max |gradient| without the pass
  // (a gradient that is exactly 0 with the pass, e.g. of a transform that
  // cancels, is rounding noise without it: compare its size instead).
  std::map<std::string, double> gradientErrors, gradientSizes;
  int gradientsCompared = 0;
  bool modulesDiffer = false; // the train IR with and without the pass
  std::string irWith, irWithout;

  double maxError() const;
};

/// Compiles, runs and compares (see the file comment). Compilation or run
/// failures are reported as test failures (ADD_FAILURE) and give a
/// Comparison with every error set to infinity.
Comparison comparePass(const PassCase &c);

/// The train IR (`stringc --emit=pe-train`) of the case, with `options`.
std::string trainIR(const PassCase &c, const CompileOptions &options);

} // namespace stringc::test
