// ZeRO-1 on GPU ranks with the f32 master weights sharded too (a bf16
// package: docs/distributed.md, "ZeRO-1 on GPUs"): which parameters the
// kernels still read in f32, where each rank keeps them, and how they
// travel after each update. Pure (no device): DeviceZeroShards.cpp uses it,
// the ranks' backend reports the memory from it (DeviceRanks.cpp).
#pragma once

#include "stringrt/CudaSection.h"
#include "stringrt/Manifest.h"

#include <cstdint>
#include <vector>

namespace stringrt::cuda {

// Whether some pe.get_param result of `section`'s programs is stored in
// bf16: the executor then keeps a bf16 copy of the parameters
// (DeviceModel::Impl::paramsBf16).
bool usesBf16Params(const Manifest &manifest, const CudaSection &section);

// A bf16 package's GEMMs read the bf16 copy of their weights; every other
// pe.get_param (layer-norm gains, biases of f32 kernels, embeddings, ...)
// reads f32 values. With the masters sharded, each rank keeps those
// parameters whole in a packed f32 buffer (`offsets`, floats, -1 for a
// parameter no program reads in f32; each at a 64-float (256-byte)
// boundary, manifest order; `floats` in all), and after each update the
// owners of their slices send them along: each rank packs the pieces of
// them inside its slice of the flat buffers (`pieces`, rank by rank) at
// rank x `rankFloats` of a staging buffer, one ncclAllGather of
// `rankFloats` a rank, and every rank copies every piece into the packed
// buffer.
struct DeviceF32Params {
  std::vector<int64_t> offsets; // per manifest parameter
  int64_t floats = 0;
  struct Piece {
    int rank = 0;        // whose slice holds it
    int64_t layout = 0;  // floats into the device layout (deviceParameterLayout)
    int64_t staged = 0;  // floats into the staging buffer (rank x rankFloats + ...)
    int64_t packed = 0;  // floats into the packed buffer
    int64_t floats = 0;
  };
  std::vector<Piece> pieces; // by rank, then layout offset
  int64_t rankFloats = 0;    // each rank's part of the staging (a multiple of 64)
};
// The plan for `ranks` slices of deviceZeroSlices(layout total, ranks).
DeviceF32Params deviceF32Params(const Manifest &manifest, const CudaSection &section, int ranks);

} // namespace stringrt::cuda
