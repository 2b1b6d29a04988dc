//===- AugmentKernels.cpp - the training images' augmentation on the GPU --===//
//
// `pe_augment_images`, launched by the runtime (not by a program op) as each
// training batch enters its step, in place of the copy of the staged images
// into the program's input (runtime/src/cuda/BatchStaging.h). The host draws
// each sample's parameters (stringrt/Augment.h: crop offsets, flip, erase
// rectangle; the erase draw uses exp and log in double, which is why it is
// not drawn here) and stages them beside the batch; the kernel moves the
// pixels, one thread per output element:
//
//   out[b, c, y, x] = 0                                 inside b's erase rectangle
//                   = in[b, c, y + oy, x' + ox]          x' = W - 1 - x when flipped
//                   = 0                                 when that source is outside
//
// Pixels are selected, never computed, so the result is bitwise the host's
// (applyAugmentation). Planned for every package whose first input is a
// batch of f32 [B, C, H, W] images (KernelPlan.cpp).
//
//===----------------------------------------------------------------------===//
#include "OpKernelUtil.h"

#include "stringc/Dialect/PE/PEOps.h"

#include "stringrt/Augment.h"
#include "stringrt/CudaSection.h"

using namespace mlir;

namespace stringc::cudagen {

void appendAugmentKernels(std::vector<KernelDef> &defs) {
  const ParamKind P = ParamKind::Ptr, I = ParamKind::I64;
  defs.push_back(
      {makeSpec(stringrt::kAugmentImagesKernel, pe::DatasetOp::getOperationName(),
                {{"out", P}, {"in", P}, {"draws", P}, {"n", I}, {"channels", I}, {"height", I},
                 {"width", I}}),
       [](KernelBuilder &k) {
         Value channels = k.arg(4), height = k.arg(5), width = k.arg(6);
         Value plane = k.mul(height, width);
         Value image = k.mul(channels, plane);
         k.forGridStride(k.arg(3), [&](Value i) {
           Value x = remU(k, i, width);
           Value y = remU(k, divU(k, i, width), height);
           Value draw = k.mul(divU(k, i, image), k.i64(stringrt::kAugmentDrawWords));
           auto word = [&](int64_t w) { return loadI32AsI64(k, k.arg(2), k.add(draw, k.i64(w))); };
           Value flipped = cmpI(k, arith::CmpIPredicate::ne, word(stringrt::kDrawFlip), k.i64(0));
           Value sx = k.add(select(k, flipped, k.sub(k.sub(width, k.i64(1)), x), x),
                            word(stringrt::kDrawOffsetX));
           Value sy = k.add(y, word(stringrt::kDrawOffsetY));
           Value inside = andI(k, inRange(k, sx, width), inRange(k, sy, height));
           // The erase rectangle [top, top + h) x [left, left + w); h = 0: none.
           Value rows = inRange(k, k.sub(y, word(stringrt::kDrawEraseTop)),
                                word(stringrt::kDrawEraseHeight));
           Value cols = inRange(k, k.sub(x, word(stringrt::kDrawEraseLeft)),
                                word(stringrt::kDrawEraseWidth));
           Value erased = andI(k, rows, cols);
           // The source within the same channel plane; element i itself
           // when outside (in bounds; the value is not used).
           Value source = k.add(k.sub(i, k.add(k.mul(y, width), x)), k.add(k.mul(sy, width), sx));
           Value v = k.load(k.arg(1), select(k, inside, source, i));
           Value zero = k.f32(0.0);
           k.store(select(k, erased, zero, select(k, inside, v, zero)), k.arg(0), i);
         });
       }});
}

} // namespace stringc::cudagen
