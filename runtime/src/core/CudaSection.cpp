// The `cuda` section of a package: parsing and validation (CudaSection.h).
#include "stringrt/CudaSection.h"

#include "Json.h"
#include "stringrt/Error.h"
#include "stringrt/Safetensors.h"

#include <fmt/format.h>

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
  }
  return "?";
}

const CudaKernel *CudaSection::find(std::string_view name) const {
  for (const CudaKernel &kernel : kernels)
    if (kernel.name == name)
      return &kernel;
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
    const JsonValue &top = object(root, "the cuda section", {"arch", "kernels", "coverage"});
    CudaSection section;
    section.arch = string(member(top, "arch"), "cuda.arch");
    static const std::regex archPattern("sm_[0-9]{2,3}a?");
    if (!std::regex_match(section.arch, archPattern))
      fail(fmt::format("cuda.arch {} is not a GPU architecture (sm_NN)",
                       quoteForMessage(section.arch)));
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
                                                           {"partials", CudaGridRule::Partials}};
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
    size_t needI64 = kernel.grid == CudaGridRule::Columns ? 2 : 1;
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
      if (parsed.program == "optimizer") {
        parsed.op = integer(member(u, "op"), where + ": an optimizer use's op", -1, -1);
      } else if (parsed.program == "forward" || parsed.program == "gradients") {
        const Program &program = manifest.program(parsed.program);
        parsed.op = integer(member(u, "op"), where + ": a use's op", 0,
                            int64_t(program.ops.size()) - 1);
        const std::string &actual = program.ops[size_t(parsed.op)].op;
        if (actual != kernel.op)
          fail(fmt::format("{} implements {} but {} op {} is {}", where, kernel.op,
                           parsed.program, parsed.op, actual));
      } else {
        fail(fmt::format("{}: unknown program {}", where, quoteForMessage(parsed.program)));
      }
      kernel.uses.push_back(std::move(parsed));
    }
    return kernel;
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
};

} // namespace

CudaSection parseCudaSection(const std::string &json, const SafetensorsFile &file,
                             const Manifest &manifest, const std::string &path) {
  return SectionParser(file, manifest, path).parse(json);
}

} // namespace stringrt
