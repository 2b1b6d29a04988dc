//===- PEInterfaces.h - op interfaces of the pe dialect ---------*- C++ -*-===//

#ifndef STRINGC_DIALECT_PE_PEINTERFACES_H
#define STRINGC_DIALECT_PE_PEINTERFACES_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpDefinition.h"
#include "llvm/ADT/SmallVector.h"

#include "stringc/Dialect/PE/PEInterfaces.h.inc"

#endif // STRINGC_DIALECT_PE_PEINTERFACES_H
