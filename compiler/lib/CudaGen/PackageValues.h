//===- PackageValues.h - the package's numbering of a block's values -*- C++ -*-===//
//
// Private to compiler/lib/CudaGen. The package numbers a program's values as
// PackageBuilder writes them: the block's arguments, then every op's results
// in order. The kernel plan (its bf16 storage by value id) and the launch
// report (which reads that storage back) use this one numbering.
//
//===----------------------------------------------------------------------===//
#ifndef STRINGC_CUDAGEN_PACKAGEVALUES_H
#define STRINGC_CUDAGEN_PACKAGEVALUES_H

#include "mlir/IR/Block.h"
#include "mlir/IR/Value.h"
#include "llvm/ADT/DenseMap.h"

#include <cstdint>

namespace stringc::cudagen {

/// The id of every value of `block` as the package numbers it: the block's
/// arguments 0..n-1, then the results of the ops before the terminator.
llvm::DenseMap<mlir::Value, int64_t> packageValueIds(mlir::Block &block);

} // namespace stringc::cudagen

#endif // STRINGC_CUDAGEN_PACKAGEVALUES_H
