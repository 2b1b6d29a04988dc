//===- PEInterfaces.cpp - op interfaces of the pe dialect -----------------===//

#include "stringc/Dialect/PE/PEInterfaces.h"

#include "stringc/Dialect/PE/PEInterfaces.cpp.inc"
