//===- PytorchOps.h - one pe op as a PyTorch expression ---------*- C++ -*-===//
//
// The op-by-op half of --emit=pytorch (EmitPytorch.cpp is the structure):
// the PyTorch expression of one graph op, the functions of pe_ops.py it
// needs, and how its result is named.
//
//===----------------------------------------------------------------------===//
#ifndef STRINGC_EMITPYTORCH_PYTORCHOPS_H
#define STRINGC_EMITPYTORCH_PYTORCHOPS_H

#include "stringc/Frontend/Graph.h"

#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace stringc::pytorch {

/// An attribute as a Python literal: 64, 0.02, True, "causal", [1, 2].
std::string pythonLiteral(const AttrValue &value);

/// The text of attribute `name` of the op being rendered, or nullopt when
/// the op has none (EmitPytorch.cpp substitutes `self.NAME` for attributes
/// that differ between a block's uses).
using AttrText = std::function<std::optional<std::string>(const std::string &name)>;

/// The expression computing `op` from its operands' expressions, adding the
/// pe_ops.py functions it calls to `helpers`; nullopt (and `error`) for an
/// op without a PyTorch form. `dtype` is the expression of the floating
/// type for ops without operands.
std::optional<std::string> renderOp(const GraphOp &op, const std::vector<std::string> &operands,
                                    const AttrText &attr, const std::string &dtype,
                                    std::set<std::string> &helpers, std::string &error);

/// Whether the op takes `dtype` (tables computed from attributes alone).
bool needsDtype(const GraphOp &op);

/// A word for the op's result ("normed", "rotated", ...), never one letter.
std::string resultNoun(const GraphOp &op);

/// Every function name of pe_ops.py (names no variable may take).
std::vector<std::string> supportFunctionNames();

/// The functions of pe_ops.py named in `helpers` and those they use, in the
/// file's order, as Python source.
std::string supportFunctions(const std::set<std::string> &helpers);

} // namespace stringc::pytorch

#endif // STRINGC_EMITPYTORCH_PYTORCHOPS_H
