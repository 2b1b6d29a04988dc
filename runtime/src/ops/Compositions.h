// Fused ops by composition (docs/architecture.md, "Fused ops by
// composition"): each fused op that is a plain composition of library ops
// (docs/dialect.md, "Hoisted and fused ops", states its math) declares it
// once, as a row of the table in Compositions.cpp: the steps, each a library
// op whose operands and results are the fused op's operands, its results or
// temporaries, and whose attributes are the fused op's of the same name or
// constants. One generic reference kernel, runComposition, runs any row: the
// fused op's shape contract (its registered `check`), then each step's
// registered reference kernel, rounding between the steps as the unfused
// ops do, so the fused op has the bits of the ops it fuses. Such an op
// registers no reference kernel of its own (OpRegistry::add takes
// runComposition for it); its fast, generated and CUDA kernels are written
// where fusing pays. Private to the runtime.
#pragma once

#include "OpLibrary.h"

#include "stringrt/Manifest.h"

#include <cstdint>
#include <optional>
#include <vector>

namespace stringrt::ops {

// A value of a composition: the fused op's operand or result `index`, or
// the composition's temporary `index`.
struct Slot {
  enum Kind : uint8_t { Operand, Result, Temp };
  Kind kind;
  int index;
};

// An attribute of a step: `value`, or, without one, the fused op's
// attribute of the same name (its ODS default when the op leaves it out;
// none when it has neither).
struct StepAttr {
  const char *name;
  std::optional<AttrValue> value;
};

// One library op of a composition. A fused op's optional operand or result
// the op is run without (linear_gelu's bias, rope_attention's lse) is left
// out of the step's list too, so it may only end the list.
struct Step {
  OpCode op;
  std::vector<Slot> operands;
  std::vector<Slot> results;
  std::vector<StepAttr> attrs;
};

struct Composition {
  OpCode op;
  // Temporary k has the shape of the fused op's operand or result temps[k]
  // (f32; written by a step before any step reads it).
  std::vector<Slot> temps;
  std::vector<Step> steps;
  // True for an op that keeps a hand-written reference kernel because that
  // kernel rounds otherwise than the composition (linear_residual: once,
  // where linear then add round twice); the composition is then its tests'
  // oracle and not its reference kernel.
  bool ownReferenceKernel = false;
};

// Every composition, one a fused op (Compositions.cpp).
const std::vector<Composition> &compositions();
// `op`'s composition; null when it has none.
const Composition *findComposition(OpCode op);

// Throws Error when `composition` is malformed: a step's operand, result or
// attribute against the step op's schema, a temporary read before it is
// written, a fused result written twice or never. The op library checks
// every row when it is built (OpLibrary.cpp).
void checkComposition(const Composition &composition);

// The generic reference kernel: runs c's op by its composition (its `check`
// first when it registered one). Throws Error for an op without one.
void runComposition(const OpContext &c);

} // namespace stringrt::ops
