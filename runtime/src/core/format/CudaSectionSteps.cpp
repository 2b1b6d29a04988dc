// The steps of a package's `cuda` section: each op's launches (kernel
// arguments, GEMMs, explicit grids) checked against its program op, the
// values stored in bf16, and the checks across the section (every kernel
// use launched, every constant read, a bias GEMM's fallback kernel present;
// those of groups and epilogues are in CudaSectionGroups.cpp).
// Part of CudaSectionParser (CudaSectionParser.h).
#include "format/CudaSectionParser.h"

#include <algorithm>
#include <array>
#include <optional>

namespace stringrt::detail {

// The ops that launch nothing: a parameter's view, a filled constant.
bool CudaSectionParser::isFreeOp(const ProgramOp &op) {
  return op.is(OpCode::GetParam) || op.is(OpCode::ArithConstant);
}

// One argument: {"operand": k} | {"result": k} | {"scratch": k} |
// {"i64": [per_batch, constant]} | {"f32": x} | {"constant": k} |
// {"step_key": true} | {"group_table": true} | {"tickets": true}, checked
// against the op and
// the section's constants.
CudaArg CudaSectionParser::arg(const JsonValue &value, const std::string &what, const ProgramOp &op,
                               size_t scratches) const {
  if (value.kind != JsonValue::Kind::Object || value.members.size() != 1)
    fail(fmt::format(
        "{} must be an object with one key (operand, result, scratch, i64, f32, constant, "
        "step_key, group_table, tickets)",
        what));
  const detail::JsonMember &m = value.members[0];
  CudaArg a;
  auto index = [&](size_t count, const char *kind) {
    if (count == 0)
      fail(fmt::format("{}: the op ({}) has no {}", what, op.op, kind));
    return integer(m.value, fmt::format("{} ({} of {})", what, kind, op.op), 0,
                   int64_t(count) - 1);
  };
  if (m.key == "operand") {
    a.kind = CudaArgKind::Operand;
    a.index = index(op.operands.size(), "operand");
  } else if (m.key == "result") {
    a.kind = CudaArgKind::Result;
    a.index = index(op.results.size(), "result");
  } else if (m.key == "scratch") {
    a.kind = CudaArgKind::Scratch;
    a.index = index(scratches, "scratch buffer");
  } else if (m.key == "i64") {
    a.kind = CudaArgKind::I64;
    a.integer = affine(m.value, what + ".i64", /*nonNegative=*/false);
  } else if (m.key == "f32") {
    a.kind = CudaArgKind::F32;
    a.real = real(m.value, what + ".f32");
  } else if (m.key == "constant") {
    a.kind = CudaArgKind::Constant;
    if (constantCount == 0)
      fail(fmt::format("{}: the package has no constant arrays (cuda.constants is empty)",
                       what));
    a.index = integer(m.value, what + " (constant of cuda.constants)", 0,
                      int64_t(constantCount) - 1);
  } else if (m.key == "step_key") {
    if (m.value.kind != JsonValue::Kind::Bool || !m.value.boolean)
      fail(fmt::format("{}.step_key must be true", what));
    a.kind = CudaArgKind::StepKey;
  } else if (m.key == "group_table") {
    if (m.value.kind != JsonValue::Kind::Bool || !m.value.boolean)
      fail(fmt::format("{}.group_table must be true", what));
    a.kind = CudaArgKind::GroupTable; // only in a kernel group's launch (checkKernelGroups)
  } else if (m.key == "tickets") {
    if (m.value.kind != JsonValue::Kind::Bool || !m.value.boolean)
      fail(fmt::format("{}.tickets must be true", what));
    a.kind = CudaArgKind::Tickets; // only with an explicit grid of fixed x (kernelLaunch)
  } else {
    fail(fmt::format("{}: unknown argument kind {}", what, quoteForMessage(m.key)));
  }
  return a;
}

CudaArg CudaSectionParser::pointerArg(const JsonValue &value, const std::string &what,
                                      const ProgramOp &op, size_t scratches) const {
  CudaArg a = arg(value, what, op, scratches);
  if (!a.isPointer() || a.kind == CudaArgKind::StepKey || a.kind == CudaArgKind::GroupTable ||
      a.kind == CudaArgKind::Tickets)
    fail(fmt::format("{} must be an operand, result, scratch buffer or constant", what));
  return a;
}

CudaGemm CudaSectionParser::gemm(const JsonValue &value, const std::string &what,
                                 const ProgramOp &op, size_t scratches) const {
  bool hasEpilogue = false, hasAddend = false, hasGroup = false;
  if (value.kind == JsonValue::Kind::Object)
    for (const detail::JsonMember &m : value.members) {
      hasEpilogue = hasEpilogue || m.key == "epilogue";
      hasAddend = hasAddend || m.key == "addend";
      hasGroup = hasGroup || m.key == "group";
    }
  std::vector<const char *> keys = {"a",        "b",        "c",        "m",       "n",
                                    "k",        "count",    "stride_a", "stride_b", "stride_c",
                                    "trans_a",  "trans_b",  "alpha",    "beta"};
  if (hasEpilogue)
    keys.insert(keys.end(), {"epilogue", "bias"});
  if (hasAddend)
    keys.push_back("addend");
  if (hasGroup)
    keys.push_back("group");
  const JsonValue &g = object(value, what, keys);
  CudaGemm call;
  call.a = pointerArg(member(g, "a"), what + ".a", op, scratches);
  call.b = pointerArg(member(g, "b"), what + ".b", op, scratches);
  call.c = pointerArg(member(g, "c"), what + ".c", op, scratches);
  if (call.c.kind == CudaArgKind::Constant)
    fail(fmt::format("{}.c: a GEMM cannot write a constant array", what));
  call.m = affine(member(g, "m"), what + ".m", true);
  call.n = affine(member(g, "n"), what + ".n", true);
  call.k = affine(member(g, "k"), what + ".k", true);
  call.count = affine(member(g, "count"), what + ".count", true);
  call.strideA = affine(member(g, "stride_a"), what + ".stride_a", true);
  call.strideB = affine(member(g, "stride_b"), what + ".stride_b", true);
  call.strideC = affine(member(g, "stride_c"), what + ".stride_c", true);
  auto flag = [&](const char *key) {
    const JsonValue &v = member(g, key);
    if (v.kind != JsonValue::Kind::Bool)
      fail(fmt::format("{}.{} must be true or false", what, key));
    return v.boolean;
  };
  call.transA = flag("trans_a");
  call.transB = flag("trans_b");
  call.alpha = real(member(g, "alpha"), what + ".alpha");
  call.beta = real(member(g, "beta"), what + ".beta");
  if (hasEpilogue) {
    std::string epilogue = string(member(g, "epilogue"), what + ".epilogue");
    if (epilogue == "bias_grad") {
      // The bias names a result of the next entry's op (checkBiasGradients).
      const JsonValue &bias = member(g, "bias");
      if (bias.kind != JsonValue::Kind::Object || bias.members.size() != 1 ||
          bias.members[0].key != "result")
        fail(fmt::format("{}.bias of a bias_grad epilogue must be {{\"result\": k}} (a result "
                         "of the next entry's op)",
                         what));
      call.epilogue = CudaGemmEpilogue::BiasGrad;
      call.bias = CudaArg::result(
          integer(bias.members[0].value, what + ".bias.result", 0, (int64_t(1) << 20)));
      if (call.beta != 0.0f || hasAddend || call.count.perBatch != 0 || call.count.constant != 1)
        fail(fmt::format("{}: a bias_grad epilogue needs count 1, beta 0 and no addend", what));
      if (hasGroup)
        fail(fmt::format("{}: a GEMM with a bias_grad epilogue is not grouped", what));
      return call;
    }
    if (epilogue != "bias")
      fail(fmt::format("{}.epilogue must be \"bias\" or \"bias_grad\", got {}", what,
                       quoteForMessage(epilogue)));
    call.epilogue = CudaGemmEpilogue::Bias;
    call.bias = pointerArg(member(g, "bias"), what + ".bias", op, scratches);
    if ((call.beta != 0.0f && !hasAddend) || call.count.perBatch != 0 ||
        call.count.constant != 1)
      fail(fmt::format("{}: a bias epilogue needs count 1, and beta 0 unless an addend is given",
                       what));
  }
  if (hasAddend) {
    call.addend = pointerArg(member(g, "addend"), what + ".addend", op, scratches);
    if (call.beta == 0.0f || call.count.perBatch != 0 || call.count.constant != 1)
      fail(fmt::format("{}: an addend needs beta != 0 and count 1", what));
  }
  if (hasGroup) // the members are checked by checkGemmGroups
    call.groupSize = integer(member(g, "group"), what + ".group", 2, int64_t(1) << 20);
  return call;
}

CudaLaunch CudaSectionParser::launch(const JsonValue &value, const std::string &what,
                                     const ProgramOp &op, size_t scratches,
                                     const CudaSection &section) const {
  if (value.kind == JsonValue::Kind::Object && value.members.size() == 1 &&
      value.members[0].key == "gemm") {
    CudaLaunch l;
    l.gemm = gemm(value.members[0].value, what + ".gemm", op, scratches);
    return l;
  }
  bool explicitGrid = false, grouped = false;
  if (value.kind == JsonValue::Kind::Object)
    for (const detail::JsonMember &m : value.members) {
      explicitGrid = explicitGrid || m.key == "grid";
      grouped = grouped || m.key == "group";
    }
  std::vector<const char *> keys = {"kernel", "args"};
  if (explicitGrid)
    keys.push_back("grid");
  if (grouped)
    keys.push_back("group");
  const JsonValue &k = object(value, what, keys);
  std::string name = string(member(k, "kernel"), what + ".kernel");
  CudaLaunch l;
  for (size_t i = 0; i < section.kernels.size(); ++i)
    if (section.kernels[i].name == name)
      l.kernel = int64_t(i);
  if (l.kernel < 0)
    fail(fmt::format("{}: kernel {} is not in cuda.kernels", what, quoteForMessage(name)));
  const CudaKernel &kernel = section.kernels[size_t(l.kernel)];
  const JsonValue &args = array(member(k, "args"), what + ".args");
  if (args.elements.size() != kernel.params.size())
    fail(fmt::format("{}: kernel {} takes {} arguments, got {}", what, name,
                     kernel.params.size(), args.elements.size()));
  for (size_t i = 0; i < args.elements.size(); ++i) {
    std::string argWhere = fmt::format("{}.args[{}]", what, i);
    CudaArg a = arg(args.elements[i], argWhere, op, scratches);
    CudaParamKind want = kernel.params[i];
    bool matches = want == CudaParamKind::Ptr   ? a.isPointer()
                   : want == CudaParamKind::I64 ? a.kind == CudaArgKind::I64
                                                : a.kind == CudaArgKind::F32;
    if (!matches)
      fail(fmt::format("{}: kernel {} parameter {} is {}", argWhere, name, i,
                       cudaParamKindName(want)));
    l.args.push_back(a);
  }
  if (explicitGrid != (kernel.grid == CudaGridRule::Explicit))
    fail(fmt::format("{}: kernel {} (grid rule {}) {}", what, name,
                     cudaGridRuleName(kernel.grid),
                     explicitGrid ? "takes no grid" : "needs a grid"));
  if (explicitGrid) {
    const JsonValue &grid = array(member(k, "grid"), what + ".grid");
    if (grid.elements.size() != 3)
      fail(fmt::format("{}.grid must be [x, y, z]", what));
    std::array<CudaAffine, 3> dims;
    for (size_t d = 0; d < 3; ++d)
      dims[d] = affine(grid.elements[d], fmt::format("{}.grid[{}]", what, d), true);
    l.grid = dims;
  }
  // The ticket counters are indexed by blockIdx.x: the device model sizes
  // them from the largest such grid x (CudaSection::ticketWords).
  for (const CudaArg &a : l.args)
    if (a.kind == CudaArgKind::Tickets &&
        (!l.grid || (*l.grid)[0].perBatch != 0 || (*l.grid)[0].constant > kMaxTicketWords))
      fail(fmt::format("{}: a launch taking tickets needs an explicit grid whose x is fixed and "
                       "at most {}",
                       what, kMaxTicketWords));
  if (grouped) { // the members are checked by checkKernelGroups
    const JsonValue &g = object(member(k, "group"), what + ".group", {"size", "args"});
    l.groupSize = integer(member(g, "size"), what + ".group.size", 2, int64_t(1) << 20);
    const JsonValue &groupArgs = array(member(g, "args"), what + ".group.args");
    if (groupArgs.elements.empty())
      fail(fmt::format("{}.group.args is empty", what));
    for (size_t i = 0; i < groupArgs.elements.size(); ++i) {
      std::string argWhere = fmt::format("{}.group.args[{}]", what, i);
      CudaArg a = arg(groupArgs.elements[i], argWhere, op, scratches);
      // A scratch buffer only in a group of first launches (checkKernelGroups).
      if (a.kind != CudaArgKind::Operand && a.kind != CudaArgKind::Result &&
          a.kind != CudaArgKind::Scratch)
        fail(fmt::format("{} must be an operand, a result or a scratch buffer (a member's own)",
                         argWhere));
      l.groupArgs.push_back(a);
    }
  }
  bool tableArg = false;
  for (const CudaArg &a : l.args)
    tableArg = tableArg || a.kind == CudaArgKind::GroupTable;
  if (tableArg != grouped)
    fail(fmt::format("{}: {}", what,
                     grouped ? "a kernel group's launch takes its table (a group_table argument)"
                             : "a group_table argument outside a kernel group"));
  return l;
}

void CudaSectionParser::parseSteps(const JsonValue &value, CudaSection &section) {
  const JsonValue &s = object(value, "cuda.steps", {"forward", "gradients"});
  for (const char *name : {"forward", "gradients"}) {
    const Program &program = manifest.program(name);
    CudaProgramSteps steps;
    steps.program = name;
    int64_t previous = -1;
    for (const JsonValue &entry :
         array(member(s, name), fmt::format("cuda.steps.{}", name)).elements) {
      std::string where = fmt::format("cuda.steps.{}[{}]", name, steps.ops.size());
      const JsonValue &o = object(entry, where, {"op", "scratch", "launches"});
      CudaOpSteps op;
      op.op = integer(member(o, "op"), where + ".op", 0, int64_t(program.ops.size()) - 1);
      if (op.op <= previous)
        fail(fmt::format("{}: op {} is not after op {} (one entry per op, in program order)",
                         where, op.op, previous));
      previous = op.op;
      const ProgramOp &programOp = program.ops[size_t(op.op)];
      where = fmt::format("cuda.steps.{} op {} ({})", name, op.op, programOp.op);
      if (isFreeOp(programOp))
        fail(fmt::format("{}: the op needs no device work and takes no steps", where));
      const JsonValue &scratch = array(member(o, "scratch"), where + ".scratch");
      for (size_t i = 0; i < scratch.elements.size(); ++i)
        op.scratchBytes.push_back(
            affine(scratch.elements[i], fmt::format("{}.scratch[{}]", where, i), true));
      const JsonValue &launches = array(member(o, "launches"), where + ".launches");
      if (launches.elements.empty())
        fail(fmt::format("{}: no launches", where));
      for (size_t i = 0; i < launches.elements.size(); ++i)
        op.launches.push_back(launch(launches.elements[i],
                                     fmt::format("{} launch {}", where, i), programOp,
                                     op.scratchBytes.size(), section));
      steps.ops.push_back(std::move(op));
    }
    section.steps.push_back(std::move(steps));
  }
}

// cuda.value_dtypes: {"forward": [[id, "BF16"], ...], "gradients": [...]},
// ids increasing; only in bf16 packages; only f32 values with a batch
// dimension (or pe.get_param results: the bf16 copy of the parameters),
// never an input, an output or an arith.constant result (the runtime
// reads and writes those as f32); GEMM operand types consistent
// (CudaGemm).
void CudaSectionParser::parseValueDTypes(const JsonValue &value, CudaSection &section) {
  const JsonValue &d = object(value, "cuda.value_dtypes", {"forward", "gradients"});
  for (CudaProgramSteps &steps : section.steps) {
    const Program &program = manifest.program(steps.program);
    std::string where = fmt::format("cuda.value_dtypes.{}", steps.program);
    std::vector<int> role(program.values.size(), 0); // 1 input/output, 2 constant, 3 param
    for (ValueId v : program.inputs)
      role[v] = 1;
    for (const ProgramOutput &out : program.outputs)
      role[out.value] = 1;
    for (const ProgramOp &op : program.ops)
      if (op.is(OpCode::ArithConstant) || op.is(OpCode::GetParam))
        for (ValueId r : op.results)
          role[r] = op.is(OpCode::GetParam) ? (role[r] ? role[r] : 3) : 2;
    int64_t previous = -1;
    for (const JsonValue &entry : array(member(d, steps.program.c_str()), where).elements) {
      std::string at = fmt::format("{}[{}]", where, steps.valueDTypes.size());
      const JsonValue &pair = array(entry, at);
      if (pair.elements.size() != 2)
        fail(fmt::format("{} must be [value, dtype]", at));
      int64_t v = integer(pair.elements[0], at + "[0]", 0, int64_t(program.values.size()) - 1);
      if (v <= previous)
        fail(fmt::format("{}: value {} is not after value {} (increasing ids)", at, v,
                         previous));
      previous = v;
      std::string name = string(pair.elements[1], at + "[1]");
      std::optional<DType> dtype = parseDType(name);
      if (!dtype || *dtype != DType::BF16)
        fail(fmt::format("{}: dtype {} is not a storage type of a value (only \"BF16\"; "
                         "values not listed are F32)",
                         at, quoteForMessage(name)));
      if (section.precision != "bf16")
        fail(fmt::format("{}: value {} is stored in bf16 in a package of precision {}", at, v,
                         section.precision));
      const ProgramValue &pv = program.values[size_t(v)];
      bool batched = !pv.shape.empty() && pv.shape[0] < 0;
      if (pv.dtype != DType::F32 || role[size_t(v)] == 1 || role[size_t(v)] == 2 ||
          (!batched && role[size_t(v)] != 3))
        fail(fmt::format("{}: value {} cannot be stored in bf16 (only f32 values with a batch "
                         "dimension or parameters, not inputs, outputs or constants)",
                         at, v));
      steps.valueDTypes.push_back({v, *dtype});
    }
  }
  for (const CudaProgramSteps &steps : section.steps)
    for (const CudaOpSteps &op : steps.ops)
      for (size_t l = 0; l < op.launches.size(); ++l)
        if (const std::optional<CudaGemm> &g = op.launches[l].gemm)
          checkGemmTypes(*g, steps, op, l);
}

void CudaSectionParser::checkGemmTypes(const CudaGemm &g, const CudaProgramSteps &steps,
                                       const CudaOpSteps &op, size_t l) const {
  const ProgramOp &programOp = manifest.program(steps.program).ops[size_t(op.op)];
  auto typeOf = [&](const CudaArg &a) {
    if (a.kind == CudaArgKind::Operand)
      return steps.dtypeOf(programOp.operands[size_t(a.index)]);
    if (a.kind == CudaArgKind::Result)
      return steps.dtypeOf(programOp.results[size_t(a.index)]);
    return DType::F32;
  };
  DType a = typeOf(g.a), b = typeOf(g.b), c = typeOf(g.c);
  bool ok = a == b && (c == DType::F32 || a == DType::BF16) &&
            (g.epilogue != CudaGemmEpilogue::Bias || typeOf(g.bias) == c) &&
            (!g.addend || typeOf(*g.addend) == c) &&
            (a == DType::F32 || (g.count.perBatch == 0 && g.count.constant == 1));
  if (!ok)
    fail(fmt::format("cuda.steps.{} op {} ({}) launch {}: GEMM types A {}, B {}, C {}{} are "
                     "not a supported combination (A and B alike, C bf16 only with bf16 A "
                     "and B, the bias and the addend of C's type, bf16 only for one matrix)",
                     steps.program, op.op, programOp.op, l, dtypeName(a), dtypeName(b),
                     dtypeName(c),
                     (g.epilogue == CudaGemmEpilogue::Bias
                          ? fmt::format(", bias {}", dtypeName(typeOf(g.bias)))
                          : std::string()) +
                         (g.addend ? fmt::format(", addend {}", dtypeName(typeOf(*g.addend)))
                                   : std::string())));
}

// Every use of a kernel by a program op is a launch in that op's steps.
void CudaSectionParser::checkUses(const CudaSection &section) const {
  for (size_t k = 0; k < section.kernels.size(); ++k)
    for (const CudaKernelUse &use : section.kernels[k].uses) {
      if (use.program == "optimizer" || use.program == "data")
        continue; // launched by the runtime
      const CudaProgramSteps *steps = section.stepsOf(use.program);
      bool launched = false;
      for (const CudaOpSteps &op : steps->ops)
        if (op.op == use.op)
          for (const CudaLaunch &l : op.launches)
            launched = launched || l.kernel == int64_t(k) ||
                       // the fallback of a bias epilogue (checkBiasFallback)
                       (l.gemm && l.gemm->epilogue == CudaGemmEpilogue::Bias &&
                        section.kernels[k].name == biasFallbackOf(*steps, op, *l.gemm));
      if (!launched)
        fail(fmt::format("kernel {} is used by {} op {}, whose steps do not launch it",
                         quoteForMessage(section.kernels[k].name), use.program, use.op));
    }
}

// Every constant array is read by some launch (a package carries no dead data).
void CudaSectionParser::checkConstantsRead(const CudaSection &section) const {
  std::vector<bool> read(section.constants.size(), false);
  auto mark = [&](const CudaArg &a) {
    if (a.kind == CudaArgKind::Constant)
      read[size_t(a.index)] = true;
  };
  for (const CudaProgramSteps &program : section.steps)
    for (const CudaOpSteps &op : program.ops)
      for (const CudaLaunch &l : op.launches) {
        for (const CudaArg &a : l.args)
          mark(a);
        if (l.gemm) {
          mark(l.gemm->a);
          mark(l.gemm->b);
          if (l.gemm->epilogue == CudaGemmEpilogue::Bias)
            mark(l.gemm->bias);
          if (l.gemm->addend)
            mark(*l.gemm->addend);
        }
      }
  for (size_t c = 0; c < read.size(); ++c)
    if (!read[c])
      fail(fmt::format("cuda.constants[{}] is read by no launch", c));
}

// A bias epilogue falls back to the pe_add_bias kernel (y, b, n, d) where
// cuBLASLt cannot run it, so a package using one carries that kernel.
void CudaSectionParser::checkBiasFallback(const CudaSection &section) const {
  std::set<std::string> needed;
  for (const CudaProgramSteps &program : section.steps)
    for (const CudaOpSteps &op : program.ops)
      for (const CudaLaunch &l : op.launches)
        if (l.gemm && l.gemm->epilogue == CudaGemmEpilogue::Bias)
          needed.insert(biasFallbackOf(program, op, *l.gemm));
  const std::vector<CudaParamKind> params = {CudaParamKind::Ptr, CudaParamKind::Ptr,
                                             CudaParamKind::I64, CudaParamKind::I64};
  for (const std::string &name : needed) {
    const CudaKernel *kernel = section.find(name);
    if (!kernel)
      fail(fmt::format("cuda.steps: a GEMM has a bias epilogue but cuda.kernels has no {} (its "
                       "fallback)",
                       name));
    if (kernel->params != params || kernel->grid != CudaGridRule::Elements)
      fail(fmt::format("cuda.kernels: {} (the bias epilogue's fallback) must take (ptr, ptr, "
                       "i64, i64) with grid rule elements",
                       name));
  }
}

// The fallback kernel of a bias GEMM, by the type of its C.
std::string CudaSectionParser::biasFallbackOf(const CudaProgramSteps &program,
                                              const CudaOpSteps &op, const CudaGemm &g) const {
  const ProgramOp &programOp = manifest.program(program.program).ops[size_t(op.op)];
  DType c = g.c.kind == CudaArgKind::Operand  ? program.dtypeOf(programOp.operands[size_t(g.c.index)])
            : g.c.kind == CudaArgKind::Result ? program.dtypeOf(programOp.results[size_t(g.c.index)])
                                              : DType::F32;
  return cudaBiasFallbackKernel(c);
}

} // namespace stringrt::detail
