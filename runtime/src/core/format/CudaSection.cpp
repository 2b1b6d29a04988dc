// The `cuda` section of a package: parsing and validation (CudaSection.h).
#include "stringrt/CudaSection.h"

#include <algorithm>

#include "format/Json.h"
#include "stringrt/Error.h"
#include "stringrt/Safetensors.h"

#include <fmt/format.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <regex>
#include <set>

namespace stringrt {

using detail::JsonValue;
using detail::quoteForMessage;

const char *cudaParamKindName(CudaParamKind kind) {
  switch (kind) {
  case CudaParamKind::Ptr:
    return "ptr";
  case CudaParamKind::I64:
    return "i64";
  case CudaParamKind::F32:
    return "f32";
  }
  return "?";
}

const char *cudaGridRuleName(CudaGridRule rule) {
  switch (rule) {
  case CudaGridRule::Elements:
    return "elements";
  case CudaGridRule::Rows:
    return "rows";
  case CudaGridRule::Columns:
    return "columns";
  case CudaGridRule::Partials:
    return "partials";
  case CudaGridRule::Explicit:
    return "explicit";
  }
  return "?";
}

namespace {
// Blocks for `work` items at `perBlock` a block, at most `cap`.
int64_t blocksFor(int64_t work, int64_t perBlock, int64_t cap) {
  if (work <= 0 || perBlock <= 0)
    return 0;
  return std::min((work + perBlock - 1) / perBlock, cap);
}
} // namespace

int64_t cudaRuleGridX(CudaGridRule rule, int64_t blockX, int64_t blockY, int64_t firstInt,
                      int64_t secondInt) {
  switch (rule) {
  case CudaGridRule::Elements:
    return blocksFor(firstInt, blockX, kCudaMaxStrideBlocks);
  case CudaGridRule::Rows:
    return blocksFor(firstInt, blockY, int64_t(1) << 31);
  case CudaGridRule::Columns:
    return blocksFor(secondInt, blockX, kCudaMaxStrideBlocks);
  case CudaGridRule::Partials:
    return blocksFor(firstInt, blockX, kCudaMaxPartials);
  case CudaGridRule::Explicit:
    break;
  }
  return 0;
}

const CudaKernel *CudaSection::find(std::string_view name) const {
  for (const CudaKernel &kernel : kernels)
    if (kernel.name == name)
      return &kernel;
  return nullptr;
}

bool CudaSection::usesStepKey() const {
  for (const CudaProgramSteps &p : steps)
    for (const CudaOpSteps &op : p.ops)
      for (const CudaLaunch &l : op.launches)
        for (const CudaArg &a : l.args)
          if (a.kind == CudaArgKind::StepKey)
            return true;
  return false;
}

const char *cudaBiasFallbackKernel(DType c) {
  return c == DType::BF16 ? "pe_add_bias__bb" : "pe_add_bias";
}

DType CudaProgramSteps::dtypeOf(int64_t v) const {
  auto it = std::lower_bound(valueDTypes.begin(), valueDTypes.end(), v,
                             [](const auto &entry, int64_t id) { return entry.first < id; });
  return it != valueDTypes.end() && it->first == v ? it->second : DType::F32;
}

bool CudaSection::storesBf16() const {
  for (const CudaProgramSteps &p : steps)
    if (!p.valueDTypes.empty())
      return true;
  return false;
}

const CudaProgramSteps *CudaSection::stepsOf(std::string_view program) const {
  for (const CudaProgramSteps &p : steps)
    if (p.program == program)
      return &p;
  return nullptr;
}

namespace {

class SectionParser {
public:
  SectionParser(const SafetensorsFile &file, const Manifest &manifest, const std::string &path)
      : file(file), manifest(manifest), path(path) {}

  CudaSection parse(const std::string &json) {
    JsonValue root;
    try {
      root = detail::parseJson(json);
    } catch (const detail::JsonParseError &error) {
      fail(fmt::format("the cuda section is not valid JSON: {}", error.what()));
    }
    // "value_dtypes" is optional: a package without it stores every value in f32.
    bool hasDTypes = root.kind == JsonValue::Kind::Object &&
                     std::any_of(root.members.begin(), root.members.end(),
                                 [](const detail::JsonMember &m) { return m.key == "value_dtypes"; });
    const JsonValue &top =
        hasDTypes ? object(root, "the cuda section",
                           {"arch", "kernels", "coverage", "steps", "constants", "precision",
                            "value_dtypes"})
                  : object(root, "the cuda section",
                           {"arch", "kernels", "coverage", "steps", "constants", "precision"});
    CudaSection section;
    section.arch = string(member(top, "arch"), "cuda.arch");
    static const std::regex archPattern("sm_[0-9]{2,3}a?");
    if (!std::regex_match(section.arch, archPattern))
      fail(fmt::format("cuda.arch {} is not a GPU architecture (sm_NN)",
                       quoteForMessage(section.arch)));
    section.precision = string(member(top, "precision"), "cuda.precision");
    if (section.precision != "fp32" && section.precision != "bf16")
      fail(fmt::format("cuda.precision {} is not a GPU precision (fp32 or bf16)",
                       quoteForMessage(section.precision)));
    const JsonValue &kernels = array(member(top, "kernels"), "cuda.kernels");
    std::set<std::string> names, tensors;
    for (const JsonValue &entry : kernels.elements) {
      CudaKernel kernel = parseKernel(entry);
      if (!names.insert(kernel.name).second)
        fail(fmt::format("cuda.kernels: kernel {} is listed twice", quoteForMessage(kernel.name)));
      tensors.insert("ptx." + kernel.name);
      tensors.insert("cubin." + kernel.name);
      section.kernels.push_back(std::move(kernel));
    }
    for (const TensorInfo &tensor : file.tensors())
      if (!tensors.count(tensor.name))
        fail(fmt::format("tensor {} belongs to no kernel of the cuda section",
                         quoteForMessage(tensor.name)));
    parseCoverage(member(top, "coverage"), section);
    parseConstants(member(top, "constants"), section);
    parseSteps(member(top, "steps"), section);
    if (hasDTypes)
      parseValueDTypes(member(top, "value_dtypes"), section);
    checkUses(section);
    checkConstantsRead(section);
    checkBiasFallback(section);
    return section;
  }

private:
  [[noreturn]] void fail(const std::string &message) const { throw Error(path, message); }

  const JsonValue &object(const JsonValue &value, const std::string &what,
                          std::initializer_list<const char *> keys) const {
    if (value.kind != JsonValue::Kind::Object)
      fail(fmt::format("{} must be an object, got {}", what, detail::jsonKindName(value.kind)));
    std::set<std::string> seen;
    for (const detail::JsonMember &m : value.members) {
      bool known = false;
      for (const char *key : keys)
        known = known || m.key == key;
      if (!known)
        fail(fmt::format("{}: unknown key {}", what, quoteForMessage(m.key)));
      if (!seen.insert(m.key).second)
        fail(fmt::format("{}: duplicate key {}", what, quoteForMessage(m.key)));
    }
    for (const char *key : keys)
      if (!seen.count(key))
        fail(fmt::format("{}: missing key \"{}\"", what, key));
    return value;
  }
  static const JsonValue &member(const JsonValue &object, const char *key) {
    for (const detail::JsonMember &m : object.members)
      if (m.key == key)
        return m.value;
    throw std::logic_error("member checked by object()");
  }
  const JsonValue &array(const JsonValue &value, const std::string &what) const {
    if (value.kind != JsonValue::Kind::Array)
      fail(fmt::format("{} must be an array, got {}", what, detail::jsonKindName(value.kind)));
    return value;
  }
  std::string string(const JsonValue &value, const std::string &what) const {
    if (value.kind != JsonValue::Kind::String)
      fail(fmt::format("{} must be a string, got {}", what, detail::jsonKindName(value.kind)));
    return value.text;
  }
  int64_t integer(const JsonValue &value, const std::string &what, int64_t low,
                  int64_t high) const {
    std::optional<int64_t> number = value.kind == JsonValue::Kind::Number ? value.asInt64()
                                                                         : std::nullopt;
    if (!number || *number < low || *number > high)
      fail(fmt::format("{} must be an integer in [{}, {}]", what, low, high));
    return *number;
  }

  std::vector<uint8_t> bytes(const std::string &tensor, const std::string &kernel) const {
    const TensorInfo *info = file.find(tensor);
    if (!info)
      fail(fmt::format("kernel {} has no tensor {}", quoteForMessage(kernel),
                       quoteForMessage(tensor)));
    if (info->dtype != DType::U8 || info->shape.size() != 1 || info->shape[0] < 1)
      fail(fmt::format("tensor {} must be a non-empty 1-D U8 tensor", quoteForMessage(tensor)));
    return file.readBytes(tensor);
  }

  CudaKernel parseKernel(const JsonValue &entry) {
    const JsonValue &k = object(entry, "a cuda kernel",
                                {"name", "op", "params", "grid", "block", "ptx", "cubin", "uses"});
    CudaKernel kernel;
    kernel.name = string(member(k, "name"), "a kernel's name");
    static const std::regex namePattern("[A-Za-z_][A-Za-z0-9_]*");
    if (!std::regex_match(kernel.name, namePattern))
      fail(fmt::format("kernel name {} is not an identifier", quoteForMessage(kernel.name)));
    const std::string where = "kernel " + quoteForMessage(kernel.name);
    kernel.op = string(member(k, "op"), where + ": op");
    for (const JsonValue &param : array(member(k, "params"), where + ": params").elements) {
      std::string kind = string(param, where + ": a param");
      if (kind == "ptr")
        kernel.params.push_back(CudaParamKind::Ptr);
      else if (kind == "i64")
        kernel.params.push_back(CudaParamKind::I64);
      else if (kind == "f32")
        kernel.params.push_back(CudaParamKind::F32);
      else
        fail(fmt::format("{}: unknown param kind {} (ptr, i64 or f32)", where,
                         quoteForMessage(kind)));
    }
    std::string grid = string(member(k, "grid"), where + ": grid");
    const std::pair<const char *, CudaGridRule> rules[] = {{"elements", CudaGridRule::Elements},
                                                           {"rows", CudaGridRule::Rows},
                                                           {"columns", CudaGridRule::Columns},
                                                           {"partials", CudaGridRule::Partials},
                                                           {"explicit", CudaGridRule::Explicit}};
    bool knownRule = false;
    for (auto [rule, value] : rules)
      if (grid == rule) {
        kernel.grid = value;
        knownRule = true;
      }
    if (!knownRule)
      fail(fmt::format("{}: unknown grid rule {}", where, quoteForMessage(grid)));
    const JsonValue &block = array(member(k, "block"), where + ": block");
    if (block.elements.size() != 2)
      fail(where + ": block must be [x, y]");
    kernel.blockX = integer(block.elements[0], where + ": block[0]", 1, 1024);
    kernel.blockY = integer(block.elements[1], where + ": block[1]", 1, 1024);
    if (kernel.blockX * kernel.blockY > 1024)
      fail(where + ": a block holds at most 1024 threads");
    size_t i64s = 0, ptrs = 0;
    for (CudaParamKind kind : kernel.params) {
      i64s += kind == CudaParamKind::I64;
      ptrs += kind == CudaParamKind::Ptr;
    }
    size_t needI64 = kernel.grid == CudaGridRule::Columns    ? 2
                     : kernel.grid == CudaGridRule::Explicit ? 0
                                                             : 1;
    if (i64s < needI64 || ptrs < 1)
      fail(fmt::format("{}: grid rule {} needs {} i64 and a pointer parameter", where, grid,
                       needI64));
    if ((kernel.grid == CudaGridRule::Rows || kernel.grid == CudaGridRule::Partials) &&
        kernel.blockX != 32)
      fail(fmt::format("{}: grid rule {} runs one warp per row (block[0] = 32)", where, grid));

    std::string ptxName = string(member(k, "ptx"), where + ": ptx");
    std::string cubinName = string(member(k, "cubin"), where + ": cubin");
    if (ptxName != "ptx." + kernel.name || cubinName != "cubin." + kernel.name)
      fail(fmt::format("{}: its tensors must be \"ptx.{}\" and \"cubin.{}\"", where, kernel.name,
                       kernel.name));
    std::vector<uint8_t> ptx = bytes(ptxName, kernel.name);
    kernel.ptx.assign(ptx.begin(), ptx.end());
    if (kernel.ptx.find(".entry " + kernel.name + "(") == std::string::npos)
      fail(fmt::format("{}: its PTX has no entry point {}", where, kernel.name));
    kernel.cubin = bytes(cubinName, kernel.name);

    for (const JsonValue &use : array(member(k, "uses"), where + ": uses").elements) {
      const JsonValue &u = object(use, where + ": a use", {"program", "op"});
      CudaKernelUse parsed;
      parsed.program = string(member(u, "program"), where + ": a use's program");
      if (parsed.program == "optimizer" || parsed.program == "data") {
        parsed.op = integer(member(u, "op"), where + ": a runtime use's op", -1, -1);
      } else if (parsed.program == "forward" || parsed.program == "gradients") {
        const Program &program = manifest.program(parsed.program);
        parsed.op = integer(member(u, "op"), where + ": a use's op", 0,
                            int64_t(program.ops.size()) - 1);
        // That the op's steps launch the kernel is checked by checkUses.
      } else {
        fail(fmt::format("{}: unknown program {}", where, quoteForMessage(parsed.program)));
      }
      kernel.uses.push_back(std::move(parsed));
    }
    return kernel;
  }

  // The ops that launch nothing: a parameter's view, a filled constant.
  static bool isFreeOp(const ProgramOp &op) {
    return op.is(OpCode::GetParam) || op.is(OpCode::ArithConstant);
  }

  // [per_batch, constant]: per_batch within 2^31 and constant within 2^50,
  // so that at(batch) of any batch up to 2^31 fits an int64_t.
  CudaAffine affine(const JsonValue &value, const std::string &what, bool nonNegative) const {
    const int64_t perBatchLimit = int64_t(1) << 31, limit = int64_t(1) << 50;
    if (value.kind != JsonValue::Kind::Array || value.elements.size() != 2)
      fail(fmt::format("{} must be [per_batch, constant]", what));
    CudaAffine a;
    a.perBatch = integer(value.elements[0], what + "[0]", nonNegative ? 0 : -perBatchLimit,
                         perBatchLimit);
    a.constant = integer(value.elements[1], what + "[1]", nonNegative ? 0 : -limit, limit);
    return a;
  }

  float real(const JsonValue &value, const std::string &what) const {
    if (value.kind != JsonValue::Kind::Number)
      fail(fmt::format("{} must be a number", what));
    double number = std::strtod(value.text.c_str(), nullptr);
    if (!std::isfinite(number) || std::fabs(number) > 3.4e38)
      fail(fmt::format("{} must be a finite f32", what));
    return float(number);
  }

  // One argument: {"operand": k} | {"result": k} | {"scratch": k} |
  // {"i64": [per_batch, constant]} | {"f32": x} | {"constant": k} |
  // {"step_key": true}, checked against the op and the section's constants.
  CudaArg arg(const JsonValue &value, const std::string &what, const ProgramOp &op,
              size_t scratches) const {
    if (value.kind != JsonValue::Kind::Object || value.members.size() != 1)
      fail(fmt::format(
          "{} must be an object with one key (operand, result, scratch, i64, f32, constant, "
          "step_key)",
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
    } else {
      fail(fmt::format("{}: unknown argument kind {}", what, quoteForMessage(m.key)));
    }
    return a;
  }

  CudaArg pointerArg(const JsonValue &value, const std::string &what, const ProgramOp &op,
                     size_t scratches) const {
    CudaArg a = arg(value, what, op, scratches);
    if (!a.isPointer() || a.kind == CudaArgKind::StepKey)
      fail(fmt::format("{} must be an operand, result, scratch buffer or constant", what));
    return a;
  }

  CudaGemm gemm(const JsonValue &value, const std::string &what, const ProgramOp &op,
                size_t scratches) const {
    bool hasEpilogue = false;
    if (value.kind == JsonValue::Kind::Object)
      for (const detail::JsonMember &m : value.members)
        hasEpilogue = hasEpilogue || m.key == "epilogue";
    const JsonValue &g =
        hasEpilogue ? object(value, what,
                             {"a", "b", "c", "m", "n", "k", "count", "stride_a", "stride_b",
                              "stride_c", "trans_a", "trans_b", "alpha", "beta", "epilogue",
                              "bias"})
                    : object(value, what,
                             {"a", "b", "c", "m", "n", "k", "count", "stride_a", "stride_b",
                              "stride_c", "trans_a", "trans_b", "alpha", "beta"});
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
      if (epilogue != "bias")
        fail(fmt::format("{}.epilogue must be \"bias\", got {}", what,
                         quoteForMessage(epilogue)));
      call.epilogue = CudaGemmEpilogue::Bias;
      call.bias = pointerArg(member(g, "bias"), what + ".bias", op, scratches);
      if (call.beta != 0.0f || call.count.perBatch != 0 || call.count.constant != 1)
        fail(fmt::format("{}: a bias epilogue needs beta 0 and count 1", what));
    }
    return call;
  }

  CudaLaunch launch(const JsonValue &value, const std::string &what, const ProgramOp &op,
                    size_t scratches, const CudaSection &section) const {
    if (value.kind == JsonValue::Kind::Object && value.members.size() == 1 &&
        value.members[0].key == "gemm") {
      CudaLaunch l;
      l.gemm = gemm(value.members[0].value, what + ".gemm", op, scratches);
      return l;
    }
    bool explicitGrid = false;
    if (value.kind == JsonValue::Kind::Object)
      for (const detail::JsonMember &m : value.members)
        explicitGrid = explicitGrid || m.key == "grid";
    const JsonValue &k = explicitGrid ? object(value, what, {"kernel", "args", "grid"})
                                      : object(value, what, {"kernel", "args"});
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
    return l;
  }

  void parseSteps(const JsonValue &value, CudaSection &section) {
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
  void parseValueDTypes(const JsonValue &value, CudaSection &section) {
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

  void checkGemmTypes(const CudaGemm &g, const CudaProgramSteps &steps, const CudaOpSteps &op,
                      size_t l) const {
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
              (a == DType::F32 || (g.count.perBatch == 0 && g.count.constant == 1));
    if (!ok)
      fail(fmt::format("cuda.steps.{} op {} ({}) launch {}: GEMM types A {}, B {}, C {}{} are "
                       "not a supported combination (A and B alike, C bf16 only with bf16 A "
                       "and B, the bias of C's type, bf16 only for one matrix)",
                       steps.program, op.op, programOp.op, l, dtypeName(a), dtypeName(b),
                       dtypeName(c),
                       g.epilogue == CudaGemmEpilogue::Bias
                           ? fmt::format(", bias {}", dtypeName(typeOf(g.bias)))
                           : std::string()));
  }

  // Every use of a kernel by a program op is a launch in that op's steps.
  void checkUses(const CudaSection &section) const {
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

  // cuda.constants: [{"type": "i32" | "f32", "values": [...]}]: non-empty
  // arrays of at most kMaxConstant values, i32 values integers in range,
  // f32 values finite.
  void parseConstants(const JsonValue &value, CudaSection &section) {
    constexpr int64_t kMaxConstant = int64_t(1) << 26;
    const JsonValue &list = array(value, "cuda.constants");
    for (size_t c = 0; c < list.elements.size(); ++c) {
      std::string where = fmt::format("cuda.constants[{}]", c);
      const JsonValue &entry = object(list.elements[c], where, {"type", "values"});
      std::string type = string(member(entry, "type"), where + ".type");
      const JsonValue &values = array(member(entry, "values"), where + ".values");
      if (values.elements.empty() || int64_t(values.elements.size()) > kMaxConstant)
        fail(fmt::format("{}.values must hold 1 to {} values, got {}", where, kMaxConstant,
                         values.elements.size()));
      CudaConstant constant;
      if (type == "i32") {
        constant.dtype = DType::I32;
        for (size_t i = 0; i < values.elements.size(); ++i)
          constant.i32.push_back(int32_t(integer(values.elements[i],
                                                 fmt::format("{}.values[{}]", where, i),
                                                 std::numeric_limits<int32_t>::min(),
                                                 std::numeric_limits<int32_t>::max())));
      } else if (type == "f32") {
        constant.dtype = DType::F32;
        for (size_t i = 0; i < values.elements.size(); ++i)
          constant.f32.push_back(real(values.elements[i], fmt::format("{}.values[{}]", where, i)));
      } else {
        fail(fmt::format("{}.type must be \"i32\" or \"f32\", got {}", where,
                         quoteForMessage(type)));
      }
      section.constants.push_back(std::move(constant));
    }
    constantCount = section.constants.size();
  }

  // Every constant array is read by some launch (a package carries no dead data).
  void checkConstantsRead(const CudaSection &section) const {
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
          }
        }
    for (size_t c = 0; c < read.size(); ++c)
      if (!read[c])
        fail(fmt::format("cuda.constants[{}] is read by no launch", c));
  }

  // A bias epilogue falls back to the pe_add_bias kernel (y, b, n, d) where
  // cuBLASLt cannot run it, so a package using one carries that kernel.
  void checkBiasFallback(const CudaSection &section) const {
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
  std::string biasFallbackOf(const CudaProgramSteps &program, const CudaOpSteps &op,
                             const CudaGemm &g) const {
    const ProgramOp &programOp = manifest.program(program.program).ops[size_t(op.op)];
    DType c = g.c.kind == CudaArgKind::Operand  ? program.dtypeOf(programOp.operands[size_t(g.c.index)])
              : g.c.kind == CudaArgKind::Result ? program.dtypeOf(programOp.results[size_t(g.c.index)])
                                                : DType::F32;
    return cudaBiasFallbackKernel(c);
  }

  void parseCoverage(const JsonValue &value, CudaSection &section) {
    const JsonValue &c = object(value, "cuda.coverage", {"ops", "with_kernel", "without_kernel"});
    section.ops = integer(member(c, "ops"), "cuda.coverage.ops", 0, int64_t(1) << 40);
    section.opsWithKernel =
        integer(member(c, "with_kernel"), "cuda.coverage.with_kernel", 0, section.ops);
    const JsonValue &without = member(c, "without_kernel");
    if (without.kind != JsonValue::Kind::Object)
      fail("cuda.coverage.without_kernel must be an object");
    for (const detail::JsonMember &m : without.members) {
      std::vector<std::string> names;
      for (const JsonValue &name : array(m.value, "cuda.coverage.without_kernel." + m.key).elements)
        names.push_back(string(name, "an op name"));
      section.opsWithoutKernel.push_back({m.key, std::move(names)});
    }
  }

  const SafetensorsFile &file;
  const Manifest &manifest;
  const std::string &path;
  size_t constantCount = 0; // constants parsed (before the steps that read them)
};

} // namespace

CudaSection parseCudaSection(const std::string &json, const SafetensorsFile &file,
                             const Manifest &manifest, const std::string &path) {
  return SectionParser(file, manifest, path).parse(json);
}

} // namespace stringrt
