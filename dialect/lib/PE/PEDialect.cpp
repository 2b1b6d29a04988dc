//===- PEDialect.cpp - the pe dialect -------------------------------------===//

#include "stringc/Dialect/PE/PEDialect.h"
#include "stringc/Dialect/PE/PEOps.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::pe;

#include "stringc/Dialect/PE/PEDialect.cpp.inc"
#include "stringc/Dialect/PE/PEEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "stringc/Dialect/PE/PEAttrs.cpp.inc"

void PEDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "stringc/Dialect/PE/PEOps.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "stringc/Dialect/PE/PEAttrs.cpp.inc"
      >();
}

/// `pe.input` (on arguments) and `pe.output` (on results) name the model's
/// inputs and outputs for the runtime, and `pe.grad` (on the results of
/// `@gradients`, added by pe-autodiff) the parameter a gradient belongs to,
/// so they must be non-empty strings; no other `pe.` attribute is meaningful
/// there.
static LogicalResult verifyIOAttr(Operation *op, NamedAttribute attr,
                                  ArrayRef<StringRef> allowed, StringRef where,
                                  unsigned index) {
  if (!llvm::is_contained(allowed, attr.getName().strref())) {
    InFlightDiagnostic diag = op->emitOpError()
                              << "has unknown " << where << " attribute '"
                              << attr.getName().strref() << "' on " << where
                              << " #" << index << " (expected ";
    llvm::interleave(
        allowed, [&](StringRef name) { diag << "'" << name << "'"; },
        [&] { diag << " or "; });
    return diag << ")";
  }
  auto name = dyn_cast<StringAttr>(attr.getValue());
  if (!name || name.getValue().empty())
    return op->emitOpError()
           << "'" << attr.getName().strref() << "' on " << where << " #"
           << index << " must be a non-empty string, got " << attr.getValue();
  return success();
}

LogicalResult PEDialect::verifyRegionArgAttribute(Operation *op, unsigned,
                                                  unsigned argIndex,
                                                  NamedAttribute attr) {
  return verifyIOAttr(op, attr, {"pe.input"}, "argument", argIndex);
}

LogicalResult PEDialect::verifyRegionResultAttribute(Operation *op, unsigned,
                                                     unsigned resultIndex,
                                                     NamedAttribute attr) {
  return verifyIOAttr(op, attr, {"pe.output", "pe.grad"}, "result",
                      resultIndex);
}
