//===- DropoutKernels.cpp - pe.dropout (dropout and drop-path) -------------===//
//
// `pe_dropout` draws the masks of runtime/include/stringrt/DropoutMask.h bit
// for bit: Philox4x32-10 (stringrt/Philox.h) with
//   key     = (seed low, seed high)
//   counter = (group, firstSample + sample, step, 0x80000000 | stream)
// read from the step key buffer (CudaArgKind::StepKey: seed low, seed high,
// step, firstSample as u32), which the runtime writes before each step. One
// thread per group of four elements of a sample, one Philox block each, as
// the CPU kernels draw them. Drop-path (per_sample 1) uses the draw of the
// sample's element 0 for all of it: group 0, word 0.
//
// An element is kept when uniformFloat(word) = (word >> 8) / 2^24 >= p,
// which for an integer (word >> 8) is (word >> 8) >= ceil(p 2^24): the
// lowering passes that threshold, exact (p 2^24 is exact in f64), so the
// comparison is integer and the mask the CPU's. A kept element is x * scale
// with scale = float(1 / (1 - p)) (one f32 product, as the reference), a
// dropped one 0. The VJP is the same op on dy: the same kernel.
//
//===----------------------------------------------------------------------===//
#include "KernelBuilder.h"
#include "OpKernelUtil.h"

#include "stringc/Dialect/PE/PEOps.h"
#include "stringrt/DropoutMask.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

using namespace mlir;

namespace stringc::cudagen {
namespace {

using Block4 = std::array<Value, 4>;

/// Philox4x32-10 of `counter` under `key` (i32 values): Philox4x32::block.
Block4 philoxBlock(KernelBuilder &k, Block4 counter, std::array<Value, 2> key) {
  OpBuilder &b = k.builder();
  Location loc = k.location();
  using P = stringrt::Philox4x32;
  auto u32 = [&](uint32_t v) { return k.i32(int32_t(v)); };
  Value m0 = u32(P::kM0), m1 = u32(P::kM1), w0 = u32(P::kW0), w1 = u32(P::kW1);
  for (int r = 0; r < P::kRounds; ++r) {
    if (r > 0) {
      key[0] = b.create<arith::AddIOp>(loc, key[0], w0);
      key[1] = b.create<arith::AddIOp>(loc, key[1], w1);
    }
    auto p0 = b.create<arith::MulUIExtendedOp>(loc, m0, counter[0]);
    auto p1 = b.create<arith::MulUIExtendedOp>(loc, m1, counter[2]);
    auto xor3 = [&](Value a, Value c, Value d) {
      return b.create<arith::XOrIOp>(loc, b.create<arith::XOrIOp>(loc, a, c), d).getResult();
    };
    counter = {xor3(p1.getHigh(), counter[1], key[0]), p1.getLow(),
               xor3(p0.getHigh(), counter[3], key[1]), p0.getLow()};
  }
  return counter;
}

/// out[i] = keep(i) ? x[i] * scale : 0 over every group of four elements.
/// Params: (out, x, key, groups, per_sample_elements, groups_per_sample,
/// stream, threshold, per_sample, scale); groups = samples x
/// groups_per_sample drives the grid.
KernelDef dropoutKernel() {
  GpuKernelSpec spec;
  spec.name = "pe_dropout";
  spec.peOp = pe::DropoutOp::getOperationName().str();
  spec.params = {{"out", ParamKind::Ptr},
                 {"x", ParamKind::Ptr},
                 {"key", ParamKind::Ptr},
                 {"groups", ParamKind::I64},
                 {"per_sample_elements", ParamKind::I64},
                 {"groups_per_sample", ParamKind::I64},
                 {"stream", ParamKind::I64},
                 {"threshold", ParamKind::I64},
                 {"per_sample", ParamKind::I64},
                 {"scale", ParamKind::F32}};
  return {spec, [](KernelBuilder &k) {
            OpBuilder &b = k.builder();
            Location loc = k.location();
            Type i32 = b.getI32Type();
            auto toI32 = [&](Value v) { return b.create<arith::TruncIOp>(loc, i32, v).getResult(); };
            Value keyPtr = k.arg(2);
            Value seedLow = toI32(loadI32AsI64(k, keyPtr, k.i64(stringrt::kStepKeySeedLow)));
            Value seedHigh = toI32(loadI32AsI64(k, keyPtr, k.i64(stringrt::kStepKeySeedHigh)));
            Value step = toI32(loadI32AsI64(k, keyPtr, k.i64(stringrt::kStepKeyStep)));
            Value firstSample =
                toI32(loadI32AsI64(k, keyPtr, k.i64(stringrt::kStepKeyFirstSample)));
            Value perSampleElements = k.arg(4), groupsPerSample = k.arg(5);
            Value streamWord = b.create<arith::OrIOp>(loc, toI32(k.arg(6)), k.i32(INT32_MIN));
            Value threshold = toI32(k.arg(7));
            Value wholeSample = cmpI(k, arith::CmpIPredicate::ne, k.arg(8), k.i64(0));
            Value scale = k.arg(9);
            k.forGridStride(k.arg(3), [&](Value index) {
              Value sample = divU(k, index, groupsPerSample);
              Value group = remU(k, index, groupsPerSample);
              Value counterGroup = select(k, wholeSample, k.i32(0), toI32(group));
              Value counterSample = b.create<arith::AddIOp>(loc, firstSample, toI32(sample));
              Block4 words =
                  philoxBlock(k, {counterGroup, counterSample, step, streamWord}, {seedLow, seedHigh});
              Value firstElement = k.mul(group, k.i64(4));
              Value rowStart = k.mul(sample, perSampleElements);
              for (int j = 0; j < 4; ++j) {
                Value element = k.add(firstElement, k.i64(j));
                k.ifThen(cmpI(k, arith::CmpIPredicate::ult, element, perSampleElements), [&] {
                  Value word = select(k, wholeSample, words[0], words[size_t(j)]);
                  Value draw = b.create<arith::ShRUIOp>(loc, word, k.i32(8));
                  Value keep = b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::uge, draw,
                                                       threshold);
                  Value at = k.add(rowStart, element);
                  Value kept = k.mul(k.load(k.arg(1), at), scale);
                  k.store(select(k, keep, kept, k.f32(0.0)), k.arg(0), at);
                });
              }
            });
          }};
}

} // namespace

void appendDropoutKernels(std::vector<KernelDef> &defs) { defs.push_back(dropoutKernel()); }

void appendDropoutLowerings(std::vector<OpLowering> &lowerings) {
  lowerings.push_back(loweringOf<pe::DropoutOp>([](Operation &o) -> std::optional<OpSteps> {
    auto dropout = cast<pe::DropoutOp>(o);
    auto type = cast<RankedTensorType>(dropout.getX().getType());
    if (type.getRank() < 1)
      return std::nullopt;
    int64_t perSample = 1;
    for (int64_t d = 1; d < type.getRank(); ++d)
      perSample *= type.getDimSize(d);
    const int64_t groupsPerSample = (perSample + 3) / 4;
    const BatchAffine samples = type.isDynamicDim(0) ? BatchAffine{1, 0}
                                                     : BatchAffine::fixed(type.getDimSize(0));
    const BatchAffine groups{samples.perBatch * groupsPerSample,
                             samples.constant * groupsPerSample};
    const double p = dropout.getP().convertToDouble();
    const auto threshold = int64_t(stringrt::dropoutThreshold(p));
    OpSteps steps;
    steps.launches.push_back(Launch::kernelCall(
        "pe_dropout",
        {LaunchArg::result(0), LaunchArg::operand(0), LaunchArg::stepKey(),
         LaunchArg::i64(groups), LaunchArg::i64(perSample), LaunchArg::i64(groupsPerSample),
         LaunchArg::i64(int64_t(dropout.getStream())), LaunchArg::i64(threshold),
         LaunchArg::i64(dropout.getPerSample() ? 1 : 0),
         LaunchArg::f32(float(1.0 / (1.0 - p)))}));
    return steps;
  }));
}

} // namespace stringc::cudagen
