//===- string-opt.cpp - mlir-opt for the pe dialect -----------------------===//
//
// Parses, verifies, transforms and prints MLIR in the pe, func, arith and
// tensor dialects. Used by the lit tests.
//
//===----------------------------------------------------------------------===//

#include "stringc/Dialect/PE/PEDialect.h"
#include "stringc/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

int main(int argc, char **argv) {
  // Canonicalize, CSE, inlining, symbol DCE, ...
  mlir::registerTransformsPasses();
  // pe-autodiff, ...
  stringc::registerPasses();

  mlir::DialectRegistry registry;
  registry.insert<mlir::pe::PEDialect, mlir::func::FuncDialect,
                  mlir::arith::ArithDialect, mlir::tensor::TensorDialect>();

  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "stringc optimizer driver\n", registry));
}
