//===- LossKernels.cpp - the cross-entropy loss and its gradient ----------===//
//
// Kernels and op lowerings of pe.cross_entropy and pe.cross_entropy_grad
// (docs/cuda.md, "Token and reduction kernels"; runtime/src/ops/layer/
// CrossEntropy.cpp on the CPU): one warp per row (max, sum of exponentials
// by xor-shuffle butterflies), then the mean over rows (a scalar sum,
// TokenKernels.cpp's appendScalarSum); label smoothing e enters as two f32
// arguments, keep = 1 - e and spread = e / C (1 and 0 without smoothing: the
// same bits as the plain loss). Labels are i32; where the reference kernels
// throw (a label out of range), these never read out of bounds: a NaN loss
// and NaN gradient rows, so a bad batch shows as a NaN loss.
//
//===----------------------------------------------------------------------===//
#include "OpKernelUtil.h"

#include "stringc/Dialect/PE/PEOps.h"

#include "mlir/Dialect/Math/IR/Math.h"

#include <cmath>

using namespace mlir;

namespace stringc::cudagen {
namespace {

using namespace param_kinds;
using A = LaunchArg;
using Pred = arith::CmpIPredicate;

/// Runs `body(lane, row)` for the row of this warp (blockDim (32, 4)), if it
/// exists; the test is uniform per warp, so shuffles see 32 lanes.
void forWarpRow(KernelBuilder &k, Value rows, const std::function<void(Value, Value)> &body) {
  Value lane = k.threadId(gpu::Dimension::x);
  Value row = k.add(k.mul(k.blockId(gpu::Dimension::x), k.blockDim(gpu::Dimension::y)),
                    k.threadId(gpu::Dimension::y));
  k.ifThen(cmpI(k, Pred::slt, row, rows), [&] { body(lane, row); });
}

/// max_c x[base + c] and sum_c exp(x[base + c] - max) over a warp's row.
std::pair<Value, Value> softmaxStats(KernelBuilder &k, Value lane, Value x, Value base,
                                     Value classes) {
  OpBuilder &b = k.builder();
  Location loc = k.location();
  ValueRange partialMax =
      k.forLoop(lane, classes, k.i64(kWarp), {k.f32(-INFINITY)}, [&](Value c, ValueRange acc) {
        Value v = k.load(x, k.add(base, c));
        return SmallVector<Value>{b.create<arith::MaximumFOp>(loc, acc[0], v)};
      });
  Value max = warpMax(k, partialMax[0]);
  ValueRange partialSum =
      k.forLoop(lane, classes, k.i64(kWarp), {k.f32(0.0)}, [&](Value c, ValueRange acc) {
        Value e = b.create<math::ExpOp>(loc, k.sub(k.load(x, k.add(base, c)), max));
        return SmallVector<Value>{k.add(acc[0], e)};
      });
  return {max, k.warpSum(partialSum[0])};
}

void appendCrossEntropyKernels(std::vector<KernelDef> &defs) {
  auto rowSpec = [](std::string name, llvm::StringRef peOp,
                    std::vector<std::pair<std::string, ParamKind>> params) {
    return makeSpec(std::move(name), peOp, std::move(params), GridRule::Rows, kWarp,
                    kRowsPerBlock);
  };
  // losses[row] = max + log(sum exp(x - max)) - keep x[label] - spread sum(x);
  // NaN for a bad label.
  defs.push_back({rowSpec("pe_cross_entropy_rows", pe::CrossEntropyOp::getOperationName(),
                          {{"losses", P}, {"logits", P}, {"labels", P}, {"rows", I}, {"classes", I},
                           {"keep", F}, {"spread", F}}),
                  [](KernelBuilder &k) {
                    Value classes = k.arg(4);
                    forWarpRow(k, k.arg(3), [&](Value lane, Value row) {
                      Value label = loadI32AsI64(k, k.arg(2), row);
                      Value valid = andI(k, cmpI(k, Pred::sge, label, k.i64(0)),
                                         cmpI(k, Pred::slt, label, classes));
                      Value base = k.mul(row, classes);
                      auto [max, sum] = softmaxStats(k, lane, k.arg(1), base, classes);
                      Value picked =
                          k.load(k.arg(1), k.add(base, select(k, valid, label, k.i64(0))));
                      Value logSum = k.builder().create<math::LogOp>(k.location(), sum);
                      ValueRange partial = k.forLoop(
                          lane, classes, k.i64(kWarp), {k.f32(0.0)}, [&](Value c, ValueRange acc) {
                            return SmallVector<Value>{k.add(acc[0], k.load(k.arg(1), k.add(base, c)))};
                          });
                      Value sumLogits = k.warpSum(partial[0]);
                      Value loss = k.sub(k.sub(k.add(max, logSum), k.mul(k.arg(5), picked)),
                                         k.mul(k.arg(6), sumLogits));
                      k.ifThen(cmpI(k, Pred::eq, lane, k.i64(0)), [&] {
                        k.store(select(k, valid, loss, nanF32(k)), k.arg(0), row);
                      });
                    });
                  }});
  // dlogits[row, c] = dy / rows * (softmax[c] - keep (c == label) - spread);
  // NaN rows for a bad label.
  defs.push_back(
      {rowSpec("pe_cross_entropy_grad", pe::CrossEntropyGradOp::getOperationName(),
               {{"dlogits", P}, {"logits", P}, {"labels", P}, {"dy", P}, {"rows", I}, {"classes", I},
                {"keep", F}, {"spread", F}}),
       [](KernelBuilder &k) {
         Value rows = k.arg(4), classes = k.arg(5);
         forWarpRow(k, rows, [&](Value lane, Value row) {
           Value label = loadI32AsI64(k, k.arg(2), row);
           Value valid = andI(k, cmpI(k, Pred::sge, label, k.i64(0)),
                              cmpI(k, Pred::slt, label, classes));
           Value base = k.mul(row, classes);
           auto [max, sum] = softmaxStats(k, lane, k.arg(1), base, classes);
           Value factor = k.div(k.load(k.arg(3), k.i64(0)), k.toF32(rows));
           k.forLoop(lane, classes, k.i64(kWarp), {}, [&](Value c, ValueRange) {
             OpBuilder &b = k.builder();
             Value e = b.create<math::ExpOp>(k.location(), k.sub(k.load(k.arg(1), k.add(base, c)), max));
             Value p = k.div(e, sum);
             Value onehot = select(k, cmpI(k, Pred::eq, c, label), k.arg(6), k.f32(0.0));
             Value v = k.mul(factor, k.sub(k.sub(p, onehot), k.arg(7)));
             k.store(select(k, valid, v, nanF32(k)), k.arg(0), k.add(base, c));
             return SmallVector<Value>{};
           });
         });
       }});
}

//===----------------------------------------------------------------------===//
// Lowerings
//===----------------------------------------------------------------------===//

/// keep = 1 - e and spread = e / C, the launch arguments of label smoothing e.
std::pair<LaunchArg, LaunchArg> smoothingArgs(double smoothing, int64_t classes) {
  return {A::f32(static_cast<float>(1.0 - smoothing)),
          A::f32(static_cast<float>(smoothing / static_cast<double>(classes)))};
}

std::optional<OpSteps> lowerCrossEntropy(Operation &op) {
  int64_t classes = lastDimension(op.getOperand(0).getType());
  if (classes <= 0)
    return std::nullopt;
  auto [keep, spread] =
      smoothingArgs(cast<pe::CrossEntropyOp>(op).getSmoothing().convertToDouble(), classes);
  BatchAffine rows = numel(op.getOperand(1));
  OpSteps steps;
  steps.scratchBytes.push_back(rows * 4);
  steps.launches.push_back(Launch::kernelCall(
      "pe_cross_entropy_rows", {A::scratch(0), A::operand(0), A::operand(1), A::i64(rows),
                                A::i64(classes), keep, spread}));
  appendScalarSum(steps, A::scratch(0), rows, A::result(0), rows);
  return steps;
}

std::optional<OpSteps> lowerCrossEntropyGrad(Operation &op) {
  int64_t classes = lastDimension(op.getOperand(0).getType());
  if (classes <= 0)
    return std::nullopt;
  auto [keep, spread] =
      smoothingArgs(cast<pe::CrossEntropyGradOp>(op).getSmoothing().convertToDouble(), classes);
  return singleLaunch("pe_cross_entropy_grad",
                      {A::result(0), A::operand(0), A::operand(1), A::operand(2),
                       A::i64(numel(op.getOperand(1))), A::i64(classes), keep, spread});
}

} // namespace

void appendLossKernels(std::vector<KernelDef> &defs) { appendCrossEntropyKernels(defs); }

void appendLossLowerings(std::vector<OpLowering> &lowerings) {
  lowerings.push_back(loweringOf<pe::CrossEntropyOp>(lowerCrossEntropy));
  lowerings.push_back(loweringOf<pe::CrossEntropyGradOp>(lowerCrossEntropyGrad));
}

} // namespace stringc::cudagen
