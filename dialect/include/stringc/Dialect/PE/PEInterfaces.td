//===- PEInterfaces.td - op interfaces of the pe dialect ---*- tablegen -*-===//

#ifndef STRINGC_DIALECT_PE_PEINTERFACES_TD
#define STRINGC_DIALECT_PE_PEINTERFACES_TD

include "mlir/IR/OpBase.td"

def PE_DifferentiableOpInterface : OpInterface<"DifferentiableOpInterface"> {
  let cppNamespace = "::mlir::pe";
  let description = [{
    An op that knows its own derivative. The autodiff pass walks a forward
    graph backwards and asks each op, through this interface, for its
    vector-Jacobian product, built from ops of the `pe` dialect (and `arith`
    / `tensor` where needed) at the builder's insertion point.
  }];

  let methods = [
    InterfaceMethod<
      /*desc=*/[{
        Builds the vector-Jacobian product of this op; operandGrads gets one
        Value per operand (null for operands that get no gradient, e.g.
        integer ids). `resultGrads` holds one cotangent per result, of the
        result's type. Returns failure (after emitting a diagnostic) if the
        product cannot be built.
      }],
      /*retTy=*/"::mlir::LogicalResult",
      /*methodName=*/"buildVJP",
      /*args=*/(ins "::mlir::OpBuilder &":$builder,
                    "::mlir::ValueRange":$resultGrads,
                    "::llvm::SmallVectorImpl<::mlir::Value> &":$operandGrads)
    >
  ];
}

#endif // STRINGC_DIALECT_PE_PEINTERFACES_TD
