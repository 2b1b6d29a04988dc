// What each op of a package program looks like: its operand and result
// counts, operand element types and attributes. The rows are generated from
// the PE dialect's ODS (scripts/gen_op_schema.py -> OpCodes.h and
// src/core/format/OpSchemaTable.inc), so the compiler's ops and the runtime's
// validation cannot drift apart; CTest `op-schema-up-to-date` checks the
// generated files against the .td files.
#pragma once

#include "stringrt/OpCodes.h"

#include <optional>
#include <string_view>
#include <vector>

namespace stringrt {

enum class AttrKind { Int, Float, Bool, String, Ints, Enum };

struct AttrSchema {
  const char *name;
  AttrKind kind;
  // Required attributes must be present; the others are OptionalAttr (absent
  // means "not given") or DefaultValuedAttr (absent means `defaultValue`).
  bool required;
  // A DefaultValuedAttr's default (Int, Float and Bool kinds; a Bool as 0/1).
  std::optional<double> defaultValue;
  std::vector<const char *> keywords; // Enum only: the accepted words.
};

struct OpSchema {
  OpCode code;
  const char *name; // "pe.attention", "arith.constant", ...
  int minOperands, maxOperands;
  int minResults, maxResults;
  // An optional result that exists exactly when the optional operand is
  // given (pe.attention_grad's drel, with rel).
  bool resultsFollowOperands;
  // A last result the op returns only when asked for (pe.attention's lse,
  // which pe-autodiff adds in @gradients): maxResults with it, one fewer
  // without.
  bool savedResult;
  const char *operandTypes; // 'f' (f32) or 'i' (i32) per operand position.
  std::vector<AttrSchema> attrs;

  // How many results the op has with `numOperands` operands (within the
  // operand range); for most ops, maxResults.
  int resultCount(int numOperands) const;
  // Whether `numResults` results are valid with `numOperands` operands:
  // resultCount, or one fewer for an op with a saved result.
  bool acceptsResults(int numOperands, int numResults) const;
  const AttrSchema *findAttr(std::string_view attr) const;
};

const OpSchema &opSchema(OpCode code);
// The op of a name; nullopt for a name no package program may hold.
std::optional<OpCode> findOpCode(std::string_view name);
inline const char *opName(OpCode code) { return opSchema(code).name; }

} // namespace stringrt
