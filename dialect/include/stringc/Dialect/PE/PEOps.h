//===- PEOps.h - ops of the pe dialect --------------------------*- C++ -*-===//

#ifndef STRINGC_DIALECT_PE_PEOPS_H
#define STRINGC_DIALECT_PE_PEOPS_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "stringc/Dialect/PE/PEDialect.h"
#include "stringc/Dialect/PE/PEInterfaces.h"

#define GET_OP_CLASSES
#include "stringc/Dialect/PE/PEOps.h.inc"

#endif // STRINGC_DIALECT_PE_PEOPS_H
