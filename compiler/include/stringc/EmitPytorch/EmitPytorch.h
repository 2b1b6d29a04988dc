//===- EmitPytorch.h - a checked model as a PyTorch module ------*- C++ -*-===//
//
// `stringc MODEL.pe --emit=pytorch -o model.py` (docs/pytorch.md): the
// checked model graph written as a readable torch.nn.Module: one class per
// `.pe` block (its forward is the block; one instance per use, in an
// nn.ModuleList named after the block, so parameter names are the package's:
// "encoder.0.wq"), the model's class with `forward` (the outputs) and `loss`,
// and the pe ops it uses as PyTorch functions copied into the file
// (compiler/lib/EmitPytorch/pe_ops.py). Plain C++ over the graph, no MLIR.
//
//===----------------------------------------------------------------------===//
#ifndef STRINGC_EMITPYTORCH_EMITPYTORCH_H
#define STRINGC_EMITPYTORCH_EMITPYTORCH_H

#include "stringc/Frontend/Graph.h"

#include <ostream>

namespace stringc {

/// Writes `graph` as a Python module to `out`. Returns false, with a message
/// on `errors` ("stringc: error: ..."), for what it cannot write: an op
/// without a PyTorch form, or a block whose uses differ in more than
/// attribute values.
bool emitPytorch(const ModelGraph &graph, std::ostream &out, std::ostream &errors);

} // namespace stringc

#endif // STRINGC_EMITPYTORCH_EMITPYTORCH_H
