// The `cuda` section of a package (CudaSection.h): the names of its enums,
// the grid rule, the lookups, and its parsing and validation: the top level,
// the kernel table, the constants and the coverage here, the steps in
// CudaSectionSteps.cpp (CudaSectionParser.h).
#include "stringrt/CudaSection.h"

#include <algorithm>

#include "format/CudaSectionParser.h"
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

int64_t CudaSection::ticketWords() const {
  int64_t words = 0;
  for (const CudaProgramSteps &p : steps)
    for (const CudaOpSteps &op : p.ops)
      for (const CudaLaunch &l : op.launches)
        for (const CudaArg &a : l.args)
          if (a.kind == CudaArgKind::Tickets && l.grid) // the parser requires the grid
            words = std::max(words, (*l.grid)[0].constant);
  return words;
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

namespace detail {

CudaSection CudaSectionParser::parse(const std::string &json) {
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
  checkGemmGroups(section);
  checkKernelGroups(section);
  checkBiasGradients(section);
  checkUses(section);
  checkConstantsRead(section);
  checkBiasFallback(section);
  return section;
}

std::vector<uint8_t> CudaSectionParser::bytes(const std::string &tensor,
                                              const std::string &kernel) const {
  const TensorInfo *info = file.find(tensor);
  if (!info)
    fail(fmt::format("kernel {} has no tensor {}", quoteForMessage(kernel),
                     quoteForMessage(tensor)));
  if (info->dtype != DType::U8 || info->shape.size() != 1 || info->shape[0] < 1)
    fail(fmt::format("tensor {} must be a non-empty 1-D U8 tensor", quoteForMessage(tensor)));
  return file.readBytes(tensor);
}

CudaKernel CudaSectionParser::parseKernel(const JsonValue &entry) {
  // "dynamic_shared" is optional: a kernel without it uses static shared
  // memory only.
  const bool hasDynamicShared =
      entry.kind == JsonValue::Kind::Object &&
      std::any_of(entry.members.begin(), entry.members.end(),
                  [](const detail::JsonMember &m) { return m.key == "dynamic_shared"; });
  const JsonValue &k =
      hasDynamicShared
          ? object(entry, "a cuda kernel",
                   {"name", "op", "params", "grid", "block", "dynamic_shared", "ptx", "cubin",
                    "uses"})
          : object(entry, "a cuda kernel",
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
  if (hasDynamicShared)
    kernel.dynamicShared = integer(member(k, "dynamic_shared"), where + ": dynamic_shared",
                                   48 * 1024 + 1, kMaxDynamicSharedBytes);
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

// cuda.constants: [{"type": "i32" | "f32", "values": [...]}]: non-empty
// arrays of at most kMaxConstant values, i32 values integers in range,
// f32 values finite.
void CudaSectionParser::parseConstants(const JsonValue &value, CudaSection &section) {
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

void CudaSectionParser::parseCoverage(const JsonValue &value, CudaSection &section) {
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

} // namespace detail

CudaSection parseCudaSection(const std::string &json, const SafetensorsFile &file,
                             const Manifest &manifest, const std::string &path) {
  return detail::CudaSectionParser(file, manifest, path).parse(json);
}

} // namespace stringrt
