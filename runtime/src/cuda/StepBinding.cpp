// Value placement, scratch layout and launch binding of the device executor
// (StepBinding.h). Pure: no driver calls.
#include "stringrt/cuda/StepBinding.h"

#include "execution/ArenaPlan.h"
#include "stringrt/Error.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

namespace stringrt::cuda {
namespace {

uint64_t alignUp(uint64_t bytes) {
  return (bytes + kDeviceAlignment - 1) / kDeviceAlignment * kDeviceAlignment;
}

// A value's bytes at its stored type (4: f32 and i32; a bf16 value's 2).
uint64_t valueBytes(const ProgramValue &value, int64_t batch, DType stored = DType::F32) {
  int64_t elements = 1;
  for (int64_t d : value.shape)
    elements *= d < 0 ? batch : d;
  return uint64_t(elements) * (stored == DType::BF16 ? 2 : 4);
}

int64_t evaluate(const CudaAffine &a, int64_t batch, const std::string &what) {
  int64_t v = a.at(batch);
  if (v < 0)
    throw Error(fmt::format("{} is negative ({} at batch {})", what, v, batch));
  return v;
}

} // namespace

DeviceParamLayout deviceParameterLayout(const Manifest &manifest) {
  constexpr int64_t kAlignElements = int64_t(kDeviceAlignment / 4);
  DeviceParamLayout layout;
  for (const ManifestParam &p : manifest.params) {
    layout.offsets.push_back(layout.total);
    int64_t n = 1;
    for (int64_t d : p.shape)
      n *= d;
    layout.total += (n + kAlignElements - 1) / kAlignElements * kAlignElements;
  }
  return layout;
}

DeviceZeroSlices deviceZeroSlices(int64_t total, int ranks) {
  if (ranks < 1 || total < 0)
    throw Error(fmt::format("ZeRO-1 slices of {} floats on {} ranks", total, ranks));
  const int64_t unit = int64_t(kDeviceAlignment / 4);
  const int64_t each = (total + ranks - 1) / ranks;
  DeviceZeroSlices slices;
  slices.floats = std::max<int64_t>(1, (each + unit - 1) / unit) * unit;
  slices.padded = slices.floats * ranks;
  return slices;
}

ProgramPlacement placeValues(const Manifest &manifest, const Program &program,
                             const std::string &name, int64_t batch,
                             const CudaProgramSteps *steps) {
  ProgramPlacement placement;
  placement.values.resize(program.values.size());
  std::map<std::string, int64_t> paramOffsets;
  DeviceParamLayout params = deviceParameterLayout(manifest);
  for (size_t i = 0; i < manifest.params.size(); ++i)
    paramOffsets[manifest.params[i].name] = params.offsets[i];
  std::vector<bool> members = detail::arenaMembers(program);
  std::vector<int64_t> slotOffsets;
  if (program.arena) {
    detail::ArenaLayout layout =
        detail::arenaLayout(program.arena->slots, batch, int64_t(kDeviceAlignment));
    slotOffsets = layout.offsets;
    placement.arenaBytes = uint64_t(layout.bytes);
  }
  auto stored = [&](ValueId v) { return steps ? steps->dtypeOf(v) : DType::F32; };
  auto extra = [&](ValueId v) {
    ValuePlace &place = placement.values[v];
    place.region = Region::Extra;
    place.bytes = valueBytes(program.values[v], batch, stored(v));
    place.offset = placement.extraBytes;
    placement.extraBytes += alignUp(place.bytes);
  };
  for (ValueId v : program.inputs)
    extra(v);
  for (const ProgramOp &op : program.ops) {
    if (op.is(OpCode::GetParam)) {
      const std::string &param = op.getString("param");
      auto it = paramOffsets.find(param);
      if (it == paramOffsets.end())
        throw Error(fmt::format("program '{}': no parameter '{}'", name, param));
      ValuePlace &place = placement.values[op.results[0]];
      place.region = Region::Params;
      place.offset = uint64_t(it->second) * 4;
      place.bytes = valueBytes(program.values[op.results[0]], batch);
      if (steps && steps->dtypeOf(op.results[0]) == DType::BF16) {
        place.region = Region::ParamsBf16;
        place.offset /= 2;
        place.bytes /= 2;
      }
      continue;
    }
    for (ValueId r : op.results) {
      if (program.arena && members[r] && program.arena->valueSlot[r] >= 0) {
        ValuePlace &place = placement.values[r];
        place.region = Region::Arena;
        const size_t slot = size_t(program.arena->valueSlot[r]);
        place.offset = uint64_t(slotOffsets[slot]);
        place.bytes = valueBytes(program.values[r], batch, stored(r));
        // The plan sized the slot for the stored types (the loader checked
        // it against the same types); a section that stores wider is refused.
        const auto &[perBatch, fixed] = program.arena->slots[slot];
        if (place.bytes > uint64_t(perBatch * batch + fixed))
          throw Error(fmt::format("program '{}': value {} ({} bytes at batch {}) does not fit "
                                  "its arena slot {} ({} bytes)",
                                  name, r, place.bytes, batch, slot, perBatch * batch + fixed));
      } else {
        extra(r);
      }
    }
  }
  return placement;
}

ScratchLayout scratchLayout(const CudaOpSteps &steps, int64_t batch) {
  ScratchLayout layout;
  for (size_t i = 0; i < steps.scratchBytes.size(); ++i) {
    layout.offsets.push_back(layout.bytes);
    layout.bytes += alignUp(uint64_t(
        evaluate(steps.scratchBytes[i], batch, fmt::format("scratch buffer {}", i))));
  }
  return layout;
}

ConstantLayout constantLayout(const CudaSection &section) {
  ConstantLayout layout;
  for (const CudaConstant &constant : section.constants) {
    layout.offsets.push_back(layout.bytes);
    layout.bytes += alignUp(uint64_t(constant.size()) * 4);
  }
  return layout;
}

namespace {

uint64_t pointerOf(const CudaArg &arg, const OpPointers &p, const std::string &where) {
  if (arg.kind == CudaArgKind::StepKey) {
    if (p.stepKey == 0)
      throw Error(fmt::format("{}: the step key has no device address", where));
    return p.stepKey;
  }
  if (arg.kind == CudaArgKind::Tickets) {
    if (p.tickets == 0)
      throw Error(fmt::format("{}: the ticket counters have no device address", where));
    return p.tickets;
  }
  if (arg.kind == CudaArgKind::GroupTable) {
    if (p.groupTable == 0)
      throw Error(fmt::format("{}: the kernel group's pointer table is not placed", where));
    return p.groupTable;
  }
  const std::vector<uint64_t> &list = arg.kind == CudaArgKind::Operand   ? p.operands
                                      : arg.kind == CudaArgKind::Result  ? p.results
                                      : arg.kind == CudaArgKind::Scratch ? p.scratch
                                                                         : p.constants;
  const char *kind = arg.kind == CudaArgKind::Operand   ? "operand"
                     : arg.kind == CudaArgKind::Result  ? "result"
                     : arg.kind == CudaArgKind::Scratch ? "scratch"
                                                        : "constant";
  if (arg.index < 0 || size_t(arg.index) >= list.size())
    throw Error(fmt::format("{}: {} {} out of range ({} bound)", where, kind, arg.index,
                            list.size()));
  uint64_t address = list[size_t(arg.index)];
  if (address == 0)
    throw Error(fmt::format("{}: {} {} has no device address", where, kind, arg.index));
  return address;
}

} // namespace

BoundLaunch bindLaunch(const CudaSection &section, const CudaLaunch &launch,
                       const OpPointers &pointers, int64_t batch, const std::string &where,
                       const OpPointers *next) {
  BoundLaunch bound;
  if (launch.gemm) {
    const CudaGemm &g = *launch.gemm;
    BoundGemm b;
    b.a = pointerOf(g.a, pointers, where + " (gemm a)");
    b.b = pointerOf(g.b, pointers, where + " (gemm b)");
    b.c = pointerOf(g.c, pointers, where + " (gemm c)");
    b.m = evaluate(g.m, batch, where + ": gemm m");
    b.n = evaluate(g.n, batch, where + ": gemm n");
    b.k = evaluate(g.k, batch, where + ": gemm k");
    b.count = evaluate(g.count, batch, where + ": gemm count");
    b.strideA = evaluate(g.strideA, batch, where + ": gemm stride_a");
    b.strideB = evaluate(g.strideB, batch, where + ": gemm stride_b");
    b.strideC = evaluate(g.strideC, batch, where + ": gemm stride_c");
    b.transA = g.transA;
    b.transB = g.transB;
    b.alpha = g.alpha;
    b.beta = g.beta;
    if (g.epilogue == CudaGemmEpilogue::Bias)
      b.bias = pointerOf(g.bias, pointers, where + " (gemm bias)");
    if (g.epilogue == CudaGemmEpilogue::BiasGrad) {
      if (!next)
        throw Error(fmt::format("{}: a bias_grad GEMM bound without its next entry", where));
      b.biasGrad = pointerOf(g.bias, *next, where + " (gemm bias gradient, the next entry's)");
    }
    if (g.addend)
      b.addend = pointerOf(*g.addend, pointers, where + " (gemm addend)");
    auto typeOf = [&](const CudaArg &arg) {
      const std::vector<DType> &types =
          arg.kind == CudaArgKind::Operand ? pointers.operandTypes : pointers.resultTypes;
      bool typed = arg.kind == CudaArgKind::Operand || arg.kind == CudaArgKind::Result;
      return typed && size_t(arg.index) < types.size() ? types[size_t(arg.index)] : DType::F32;
    };
    b.typeA = typeOf(g.a);
    b.typeB = typeOf(g.b);
    b.typeC = typeOf(g.c);
    bound.gemm = b;
    return bound;
  }
  if (launch.kernel < 0 || size_t(launch.kernel) >= section.kernels.size())
    throw Error(fmt::format("{}: kernel index {} out of range", where, launch.kernel));
  const CudaKernel &kernel = section.kernels[size_t(launch.kernel)];
  bound.kernel = &kernel;
  if (launch.args.size() != kernel.params.size())
    throw Error(fmt::format("{}: kernel {} takes {} arguments, got {}", where, kernel.name,
                            kernel.params.size(), launch.args.size()));
  for (size_t i = 0; i < launch.args.size(); ++i) {
    const CudaArg &arg = launch.args[i];
    std::string argWhere = fmt::format("{}: kernel {} argument {}", where, kernel.name, i);
    switch (arg.kind) {
    case CudaArgKind::Operand:
    case CudaArgKind::Result:
    case CudaArgKind::Scratch:
    case CudaArgKind::Constant:
    case CudaArgKind::StepKey:
    case CudaArgKind::GroupTable:
    case CudaArgKind::Tickets:
      bound.args.push_back(KernelArg::pointer(pointerOf(arg, pointers, argWhere)));
      break;
    case CudaArgKind::I64:
      bound.args.push_back(KernelArg::integer(evaluate(arg.integer, batch, argWhere)));
      break;
    case CudaArgKind::F32:
      bound.args.push_back(KernelArg::real(arg.real));
      break;
    }
    if (bound.args.back().kind != kernel.params[i])
      throw Error(fmt::format("{} must be {}", argWhere, cudaParamKindName(kernel.params[i])));
  }
  if (launch.grid) {
    std::array<int64_t, 3> grid{};
    const int64_t limits[3] = {(int64_t(1) << 31) - 1, 65535, 65535};
    for (size_t d = 0; d < 3; ++d) {
      grid[d] = evaluate((*launch.grid)[d], batch, fmt::format("{}: grid[{}]", where, d));
      if (grid[d] > limits[d])
        throw Error(fmt::format("{}: kernel {} grid[{}] = {} exceeds the device limit {}", where,
                                kernel.name, d, grid[d], limits[d]));
    }
    bound.grid = grid;
  }
  try {
    bound.shape = launchShapeFor(kernel, bound.args, bound.grid ? &*bound.grid : nullptr);
  } catch (const Error &error) {
    throw Error(fmt::format("{}: {}", where, error.what()));
  }
  return bound;
}

std::vector<uint64_t> groupTableRow(const CudaLaunch &leader, const OpPointers &member,
                                    const std::string &where) {
  std::vector<uint64_t> row;
  for (size_t a = 0; a < leader.groupArgs.size(); ++a)
    row.push_back(pointerOf(leader.groupArgs[a], member,
                            fmt::format("{} (group argument {})", where, a)));
  return row;
}

void checkGemmGroup(const std::vector<BoundGemm> &members, const std::vector<std::string> &names) {
  struct Span {
    uint64_t begin, end;
  };
  auto span = [](uint64_t at, int64_t rows, int64_t cols, DType type) {
    return Span{at, at + uint64_t(rows) * uint64_t(cols) * dtypeSize(type)};
  };
  auto overlap = [](const Span &x, const Span &y) {
    return x.begin < y.end && y.begin < x.end && x.end > x.begin && y.end > y.begin;
  };
  const BoundGemm &first = members.front();
  for (size_t i = 0; i < members.size(); ++i) {
    const BoundGemm &g = members[i];
    if (g.m != first.m || g.n != first.n || g.k != first.k || g.transA != first.transA ||
        g.transB != first.transB || g.alpha != first.alpha || g.beta != first.beta ||
        g.typeA != first.typeA || g.typeB != first.typeB || g.typeC != first.typeC ||
        g.count != 1 || g.bias || g.addend)
      throw Error(fmt::format("{}: a member of the GEMM group of {} does not match its first "
                              "GEMM (sizes, transposes, alpha, beta, types; count 1, no bias, "
                              "no addend)",
                              names[i], names.front()));
  }
  for (size_t i = 0; i < members.size(); ++i) {
    const BoundGemm &w = members[i];
    Span c = span(w.c, w.m, w.n, w.typeC);
    for (size_t j = 0; j < members.size(); ++j) {
      if (j == i)
        continue;
      const BoundGemm &o = members[j];
      const std::pair<const char *, Span> others[] = {{"A", span(o.a, o.m, o.k, o.typeA)},
                                                      {"B", span(o.b, o.k, o.n, o.typeB)},
                                                      {"C", span(o.c, o.m, o.n, o.typeC)}};
      for (const auto &[matrix, other] : others)
        if (overlap(c, other))
          throw Error(fmt::format("{}: its GEMM's C overlaps the {} of {}, a member of the same "
                                  "GEMM group (one cublasGemmBatchedEx would race on it)",
                                  names[i], matrix, names[j]));
    }
  }
}

void checkGroupScratch(const std::vector<const CudaOpSteps *> &members, int64_t batch,
                       const std::vector<std::string> &names) {
  struct Span {
    uint64_t begin, end;
  };
  // The byte ranges of the scratch buffers the member's launches name.
  auto spans = [&](const CudaOpSteps &steps) {
    std::vector<bool> named(steps.scratchBytes.size(), false);
    auto name = [&](const CudaArg &a) {
      if (a.kind == CudaArgKind::Scratch && size_t(a.index) < named.size())
        named[size_t(a.index)] = true;
    };
    for (const CudaLaunch &l : steps.launches) {
      for (const CudaArg &a : l.args)
        name(a);
      for (const CudaArg &a : l.groupArgs)
        name(a);
      if (l.gemm) {
        for (const CudaArg *a : {&l.gemm->a, &l.gemm->b, &l.gemm->c})
          name(*a);
        if (l.gemm->addend)
          name(*l.gemm->addend);
        if (l.gemm->epilogue == CudaGemmEpilogue::Bias)
          name(l.gemm->bias);
      }
    }
    ScratchLayout layout = scratchLayout(steps, batch);
    std::vector<Span> out;
    for (size_t k = 0; k < layout.offsets.size(); ++k) {
      uint64_t bytes = uint64_t(steps.scratchBytes[k].at(batch));
      if (named[k] && bytes > 0)
        out.push_back({layout.offsets[k], layout.offsets[k] + bytes});
    }
    return out;
  };
  std::vector<std::vector<Span>> used;
  for (const CudaOpSteps *member : members)
    used.push_back(spans(*member));
  for (size_t i = 0; i < members.size(); ++i)
    for (size_t j = i + 1; j < members.size(); ++j)
      for (const Span &a : used[i])
        for (const Span &b : used[j])
          if (a.begin < b.end && b.begin < a.end)
            throw Error(fmt::format(
                "{}: its scratch bytes [{}, {}) meet [{}, {}) of {}, a member of the same kernel "
                "group (the group's launch writes every member's scratch before their own "
                "launches read it)",
                names[j], b.begin, b.end, a.begin, a.end, names[i]));
}

int64_t checkProgramSteps(const Manifest &manifest, const CudaSection &section,
                          const std::string &name, int64_t batch) {
  const Program &program = manifest.program(name);
  const CudaProgramSteps *steps = section.stepsOf(name);
  if (!steps)
    throw Error(fmt::format("the cuda section has no steps for program '{}'", name));
  ProgramPlacement placement = placeValues(manifest, program, name, batch, steps);
  // Fake, disjoint region bases: only extents are checked.
  const uint64_t base[5] = {0, uint64_t(1) << 40, uint64_t(7) << 40, uint64_t(2) << 40,
                            uint64_t(3) << 40};
  const uint64_t scratchBase = uint64_t(4) << 40, constantBase = uint64_t(5) << 40,
                 stepKeyBase = uint64_t(6) << 40, groupTableBase = uint64_t(7) << 40,
                 ticketsBase = uint64_t(8) << 40;
  ConstantLayout constants = constantLayout(section);
  std::vector<uint64_t> constantAddresses, constantBytes;
  for (size_t c = 0; c < section.constants.size(); ++c) {
    constantAddresses.push_back(constantBase + constants.offsets[c]);
    constantBytes.push_back(uint64_t(section.constants[c].size()) * 4);
  }
  auto addressOf = [&](ValueId v) -> uint64_t {
    const ValuePlace &place = placement.values[v];
    return place.bytes ? base[int(place.region)] + place.offset : 0;
  };
  // The pointers and result sizes of steps entry `e`'s op (a bias_grad
  // GEMM binds against the next entry's).
  auto entryPointers = [&](size_t e, std::vector<uint64_t> *resultBytes) {
    const CudaOpSteps &entry = steps->ops.at(e);
    const ProgramOp &op = program.ops.at(size_t(entry.op));
    OpPointers p;
    p.constants = constantAddresses;
    for (ValueId v : op.results) {
      p.results.push_back(addressOf(v));
      p.resultTypes.push_back(steps->dtypeOf(v));
      if (resultBytes)
        resultBytes->push_back(placement.values[v].bytes);
    }
    return p;
  };
  int64_t launches = 0;
  size_t next = 0;
  // The GEMM groups being bound (CudaGemm::groupSize), by the launch of
  // each member they compute (0: ops of one GEMM alone; later: the grouped
  // GEMMs of a kernel group of first launches): their size, members.
  struct GemmGroupBinding {
    int64_t size = 0;
    std::vector<BoundGemm> members;
    std::vector<std::string> names;
  };
  std::map<size_t, GemmGroupBinding> gemmGroups;
  // The kernel group of first launches being bound: its size, members.
  int64_t firstLaunchesSize = 0;
  std::vector<const CudaOpSteps *> firstLaunches;
  std::vector<std::string> firstLaunchesNames;
  for (size_t i = 0; i < program.ops.size(); ++i) {
    const ProgramOp &op = program.ops[i];
    if (op.is(OpCode::GetParam) || op.is(OpCode::ArithConstant))
      continue;
    if (next >= steps->ops.size() || steps->ops[next].op != int64_t(i))
      throw Error(fmt::format("{} op {} ({}) has no GPU steps", name, i, op.op));
    const CudaOpSteps &opSteps = steps->ops[next++];
    OpPointers pointers;
    pointers.constants = constantAddresses;
    pointers.stepKey = stepKeyBase;
    pointers.groupTable = groupTableBase;
    pointers.tickets = ticketsBase;
    std::vector<uint64_t> operandBytes, resultBytes, scratchBytes;
    for (ValueId v : op.operands) {
      pointers.operands.push_back(addressOf(v));
      pointers.operandTypes.push_back(steps->dtypeOf(v));
      operandBytes.push_back(placement.values[v].bytes);
    }
    for (ValueId v : op.results) {
      pointers.results.push_back(addressOf(v));
      pointers.resultTypes.push_back(steps->dtypeOf(v));
      resultBytes.push_back(placement.values[v].bytes);
    }
    ScratchLayout scratch = scratchLayout(opSteps, batch);
    for (size_t k = 0; k < scratch.offsets.size(); ++k) {
      uint64_t bytes = uint64_t(opSteps.scratchBytes[k].at(batch));
      pointers.scratch.push_back(bytes ? scratchBase + scratch.offsets[k] : 0);
      scratchBytes.push_back(bytes);
    }
    if (opSteps.launches.size() > 1 && opSteps.launches[0].groupSize > 1)
      firstLaunchesSize = opSteps.launches[0].groupSize;
    if (firstLaunchesSize > 0) {
      firstLaunches.push_back(&opSteps);
      firstLaunchesNames.push_back(fmt::format("{} op {} ({})", name, i, op.op));
      if (int64_t(firstLaunches.size()) == firstLaunchesSize) {
        checkGroupScratch(firstLaunches, batch, firstLaunchesNames);
        firstLaunches.clear();
        firstLaunchesNames.clear();
        firstLaunchesSize = 0;
      }
    }
    auto extent = [&](const CudaArg &arg) -> uint64_t {
      const std::vector<uint64_t> &bytes = arg.kind == CudaArgKind::Operand   ? operandBytes
                                           : arg.kind == CudaArgKind::Result  ? resultBytes
                                           : arg.kind == CudaArgKind::Scratch ? scratchBytes
                                                                              : constantBytes;
      return bytes.at(size_t(arg.index));
    };
    for (size_t l = 0; l < opSteps.launches.size(); ++l) {
      const CudaLaunch &launch = opSteps.launches[l];
      std::string where = fmt::format("{} op {} ({}) launch {}", name, i, op.op, l);
      const bool biasGrad = launch.gemm && launch.gemm->epilogue == CudaGemmEpilogue::BiasGrad;
      if (biasGrad && next >= steps->ops.size())
        throw Error(fmt::format("{}: a bias_grad GEMM in the program's last entry", where));
      std::vector<uint64_t> nextResultBytes;
      OpPointers nextPointers;
      if (biasGrad)
        nextPointers = entryPointers(next, &nextResultBytes);
      BoundLaunch bound = bindLaunch(section, launch, pointers, batch, where,
                                     biasGrad ? &nextPointers : nullptr);
      ++launches;
      if (!bound.gemm)
        continue;
      const BoundGemm &g = *bound.gemm;
      if (biasGrad &&
          uint64_t(g.n) * dtypeSize(g.typeC) > nextResultBytes.at(size_t(launch.gemm->bias.index)))
        throw Error(fmt::format("{}: the GEMM's bias gradient needs {} bytes, its buffer has {}",
                                where, uint64_t(g.n) * dtypeSize(g.typeC),
                                nextResultBytes.at(size_t(launch.gemm->bias.index))));
      if (launch.gemm->groupSize > 1)
        gemmGroups[l] = {launch.gemm->groupSize, {}, {}};
      if (auto group = gemmGroups.find(l); group != gemmGroups.end()) {
        group->second.members.push_back(g);
        group->second.names.push_back(fmt::format("{} op {} ({})", name, i, op.op));
        if (int64_t(group->second.members.size()) == group->second.size) {
          checkGemmGroup(group->second.members, group->second.names);
          gemmGroups.erase(group);
        }
      }
      auto reach = [&](int64_t rows, int64_t cols, int64_t stride, DType type) {
        return uint64_t(g.count > 0 ? (g.count - 1) * stride + rows * cols : 0) *
               dtypeSize(type);
      };
      const std::pair<const char *, std::pair<uint64_t, const CudaArg *>> matrices[] = {
          {"A", {reach(g.m, g.k, g.strideA, g.typeA), &launch.gemm->a}},
          {"B", {reach(g.k, g.n, g.strideB, g.typeB), &launch.gemm->b}},
          {"C", {reach(g.m, g.n, g.strideC, g.typeC), &launch.gemm->c}}};
      if (launch.gemm->epilogue == CudaGemmEpilogue::Bias &&
          uint64_t(g.n) * dtypeSize(g.typeC) > extent(launch.gemm->bias))
        throw Error(fmt::format("{}: the GEMM's bias needs {} bytes, its buffer has {}", where,
                                uint64_t(g.n) * dtypeSize(g.typeC), extent(launch.gemm->bias)));
      if (launch.gemm->addend &&
          reach(g.m, g.n, g.strideC, g.typeC) > extent(*launch.gemm->addend))
        throw Error(fmt::format("{}: the GEMM's addend needs {} bytes, its buffer has {}", where,
                                reach(g.m, g.n, g.strideC, g.typeC),
                                extent(*launch.gemm->addend)));
      // cuBLAS runs its 16-byte ("align4") kernels only on aligned matrices:
      // parameters, arena slots and buffers are laid out for it.
      const std::pair<const char *, uint64_t> pointersOf[] = {
          {"A", g.a}, {"B", g.b}, {"C", g.c}, {"bias", g.bias}, {"addend", g.addend},
          {"bias gradient", g.biasGrad}};
      for (const auto &[matrix, pointer] : pointersOf)
        if (pointer % 16 != 0)
          throw Error(fmt::format("{}: GEMM {} is not 16-byte aligned (offset {} in its buffer)",
                                  where, matrix, pointer % kDeviceAlignment));
      const std::pair<const char *, int64_t> strides[] = {
          {"A", g.strideA}, {"B", g.strideB}, {"C", g.strideC}};
      for (const auto &[matrix, stride] : strides)
        if (g.count > 1 && stride % 4 != 0)
          throw Error(fmt::format("{}: GEMM {}'s batch stride {} is not a multiple of 4 floats",
                                  where, matrix, stride));
      for (const auto &[matrix, need] : matrices)
        if (need.first > extent(*need.second))
          throw Error(fmt::format("{}: GEMM {} needs {} bytes, its buffer has {} (m {}, n {}, "
                                  "k {}, count {})",
                                  where, matrix, need.first, extent(*need.second), g.m, g.n, g.k,
                                  g.count));
    }
  }
  if (next != steps->ops.size())
    throw Error(fmt::format("{}: steps for op {}, which is not a compute op of the program", name,
                            steps->ops[next].op));
  return launches;
}

std::vector<std::string> uncoveredOps(const CudaSection &section, const Program &program,
                                      const std::string &name) {
  const CudaProgramSteps *steps = section.stepsOf(name);
  std::vector<bool> covered(program.ops.size(), false);
  if (steps)
    for (const CudaOpSteps &op : steps->ops)
      if (op.op >= 0 && size_t(op.op) < covered.size())
        covered[size_t(op.op)] = true;
  std::vector<std::pair<std::string, int64_t>> counts;
  for (size_t i = 0; i < program.ops.size(); ++i) {
    const std::string &op = program.ops[i].op;
    if (covered[i] || program.ops[i].is(OpCode::GetParam) ||
        program.ops[i].is(OpCode::ArithConstant))
      continue;
    auto it = std::find_if(counts.begin(), counts.end(),
                           [&](const auto &entry) { return entry.first == op; });
    if (it == counts.end())
      counts.push_back({op, 1});
    else
      ++it->second;
  }
  std::vector<std::string> names;
  for (const auto &[op, n] : counts)
    names.push_back(n > 1 ? fmt::format("{} x{}", op, n) : op);
  return names;
}

} // namespace stringrt::cuda
