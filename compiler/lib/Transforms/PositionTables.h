//===- PositionTables.h - compile-time position tables ----------*- C++ -*-===//
//
// Private to compiler/lib/Transforms. pe.seq_positions and pe.grid_positions
// are exact functions of their attributes (integer positions); the gather
// rewrites evaluate them at compile time (pe-distinct-offsets, and the error
// bound of pe-factor-generators).
//
//===----------------------------------------------------------------------===//

#ifndef STRINGC_TRANSFORMS_LIB_POSITIONTABLES_H
#define STRINGC_TRANSFORMS_LIB_POSITIONTABLES_H

#include "stringc/Dialect/PE/PEOps.h"

#include <cstdint>
#include <optional>
#include <vector>

namespace stringc::gather {

/// A [tokens, axes] table of integer positions, row-major.
struct PositionTable {
  int64_t tokens = 0, axes = 0;
  std::vector<int64_t> values;

  int64_t at(int64_t t, int64_t a) const { return values[t * axes + a]; }
};

/// The positions `value` holds when a pe.seq_positions or pe.grid_positions
/// defines it (docs/dialect.md: special tokens at 0, then 0..length-1 or
/// (n % cols, n / cols)); nothing otherwise.
inline std::optional<PositionTable> evaluatePositions(mlir::Value value) {
  mlir::Operation *def = value.getDefiningOp();
  PositionTable table;
  if (auto seq = llvm::dyn_cast_or_null<mlir::pe::SeqPositionsOp>(def)) {
    auto special = static_cast<int64_t>(seq.getSpecial());
    int64_t length = seq.getLengthAttr().getInt();
    table.tokens = special + length;
    table.axes = 1;
    table.values.assign(special, 0);
    for (int64_t n = 0; n < length; ++n)
      table.values.push_back(n);
    return table;
  }
  if (auto grid = llvm::dyn_cast_or_null<mlir::pe::GridPositionsOp>(def)) {
    auto special = static_cast<int64_t>(grid.getSpecial());
    int64_t rows = grid.getRowsAttr().getInt(), cols = grid.getColsAttr().getInt();
    table.tokens = special + rows * cols;
    table.axes = 2;
    table.values.assign(2 * special, 0);
    for (int64_t n = 0; n < rows * cols; ++n) {
      table.values.push_back(n % cols); // x: the column
      table.values.push_back(n / cols); // y: the row
    }
    return table;
  }
  return std::nullopt;
}

} // namespace stringc::gather

#endif // STRINGC_TRANSFORMS_LIB_POSITIONTABLES_H
