//===- PEDialect.h - the pe dialect and its attributes ----------*- C++ -*-===//

#ifndef STRINGC_DIALECT_PE_PEDIALECT_H
#define STRINGC_DIALECT_PE_PEDIALECT_H

#include "mlir/IR/Attributes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/DialectImplementation.h"

#include "stringc/Dialect/PE/PEDialect.h.inc"
#include "stringc/Dialect/PE/PEEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "stringc/Dialect/PE/PEAttrs.h.inc"

#endif // STRINGC_DIALECT_PE_PEDIALECT_H
