// The f32 parameters of ZeRO-1 with sharded master weights
// (stringrt/cuda/ZeroMasterShards.h).
#include "stringrt/cuda/ZeroMasterShards.h"

#include "stringrt/Error.h"
#include "stringrt/cuda/StepBinding.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <string>

namespace stringrt::cuda {

bool usesBf16Params(const Manifest &manifest, const CudaSection &section) {
  for (const CudaProgramSteps &steps : section.steps)
    for (const ProgramOp &op : manifest.program(steps.program).ops)
      if (op.is(OpCode::GetParam) && steps.dtypeOf(op.results[0]) == DType::BF16)
        return true;
  return false;
}

DeviceF32Params deviceF32Params(const Manifest &manifest, const CudaSection &section, int ranks) {
  const DeviceParamLayout layout = deviceParameterLayout(manifest);
  const DeviceZeroSlices slices = deviceZeroSlices(layout.total, ranks);
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < manifest.params.size(); ++i)
    index[manifest.params[i].name] = i;
  std::vector<bool> readF32(manifest.params.size(), false);
  for (const CudaProgramSteps &steps : section.steps)
    for (const ProgramOp &op : manifest.program(steps.program).ops)
      if (op.is(OpCode::GetParam) && steps.dtypeOf(op.results[0]) != DType::BF16) {
        auto it = index.find(op.getString("param"));
        if (it == index.end())
          throw Error(fmt::format("program '{}': no parameter '{}'", steps.program,
                                  op.getString("param")));
        readF32[it->second] = true;
      }
  const int64_t unit = int64_t(kDeviceAlignment / 4);
  auto alignUp = [&](int64_t n) { return (n + unit - 1) / unit * unit; };
  DeviceF32Params plan;
  plan.offsets.assign(manifest.params.size(), -1);
  std::vector<int64_t> sizes(manifest.params.size(), 1);
  for (size_t i = 0; i < manifest.params.size(); ++i) {
    for (int64_t d : manifest.params[i].shape)
      sizes[i] *= d;
    if (!readF32[i])
      continue;
    plan.offsets[i] = plan.floats;
    plan.floats += alignUp(sizes[i]);
  }
  // Each parameter's pieces, cut at the slice boundaries.
  std::vector<int64_t> staged(size_t(ranks), 0); // floats of each rank's part so far
  for (int r = 0; r < ranks; ++r) {
    const int64_t begin = int64_t(r) * slices.floats, end = begin + slices.floats;
    for (size_t i = 0; i < manifest.params.size(); ++i) {
      if (!readF32[i])
        continue;
      const int64_t from = std::max(begin, layout.offsets[i]);
      const int64_t to = std::min(end, layout.offsets[i] + sizes[i]);
      if (from >= to)
        continue;
      DeviceF32Params::Piece piece;
      piece.rank = r;
      piece.layout = from;
      piece.staged = staged[size_t(r)];
      piece.packed = plan.offsets[i] + (from - layout.offsets[i]);
      piece.floats = to - from;
      staged[size_t(r)] += piece.floats;
      plan.pieces.push_back(piece);
    }
  }
  plan.rankFloats = alignUp(std::max<int64_t>(1, *std::max_element(staged.begin(), staged.end())));
  for (DeviceF32Params::Piece &piece : plan.pieces)
    piece.staged += int64_t(piece.rank) * plan.rankFloats;
  return plan;
}

} // namespace stringrt::cuda
