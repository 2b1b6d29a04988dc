// writeCudaSectionJson: a CudaSection as the JSON text of a "cuda" package's
// `cuda` metadata (docs/package.md, "Target cuda"), the inverse of
// parseCudaSection (CudaSection.cpp). The compiler fills a CudaSection and
// calls it through writePackage.
#include "stringrt/CudaSection.h"

#include "format/JsonWriter.h"

#include <cstdio>

namespace stringrt {

using detail::JsonWriter;

namespace {

// An f32 as 9 significant digits: the text reads back as the same float.
void writeF32(JsonWriter &json, float value) {
  if (!std::isfinite(value))
    throw Error("the cuda section: an f32 argument is not finite");
  char text[32];
  std::snprintf(text, sizeof text, "%.9g", double(value));
  json.raw(text);
}

void writeAffine(JsonWriter &json, const CudaAffine &value) {
  json.beginArray();
  json.value(value.perBatch);
  json.value(value.constant);
  json.endArray();
}

class SectionWriter {
public:
  std::string write(const CudaSection &section) {
    json.beginObject();
    json.member("arch", section.arch);
    json.member("precision", section.precision);
    json.key("kernels");
    json.beginArray();
    for (const CudaKernel &kernel : section.kernels)
      writeKernel(kernel);
    json.endArray();
    writeCoverage(section);
    json.key("steps");
    json.beginObject();
    for (const CudaProgramSteps &program : section.steps) {
      json.key(program.program);
      json.beginArray();
      for (const CudaOpSteps &op : program.ops)
        writeOpSteps(section, op);
      json.endArray();
    }
    json.endObject();
    json.key("constants");
    json.beginArray();
    for (const CudaConstant &constant : section.constants)
      writeConstant(constant);
    json.endArray();
    if (section.storesBf16()) { // absent: every value f32 (fp32 packages unchanged)
      json.key("value_dtypes");
      json.beginObject();
      for (const CudaProgramSteps &program : section.steps) {
        json.key(program.program);
        json.beginArray();
        for (const auto &[value, dtype] : program.valueDTypes) {
          json.beginArray();
          json.value(value);
          json.value(dtypeName(dtype));
          json.endArray();
        }
        json.endArray();
      }
      json.endObject();
    }
    json.endObject();
    return json.take();
  }

private:
  void writeKernel(const CudaKernel &kernel) {
    json.beginObject();
    json.member("name", kernel.name);
    json.member("op", kernel.op);
    json.key("params");
    json.beginArray();
    for (CudaParamKind param : kernel.params)
      json.value(cudaParamKindName(param));
    json.endArray();
    json.member("grid", cudaGridRuleName(kernel.grid));
    json.key("block");
    json.beginArray();
    json.value(kernel.blockX);
    json.value(kernel.blockY);
    json.endArray();
    if (kernel.dynamicShared > 0)
      json.member("dynamic_shared", kernel.dynamicShared);
    json.member("ptx", "ptx." + kernel.name);
    json.member("cubin", "cubin." + kernel.name);
    json.key("uses");
    json.beginArray();
    for (const CudaKernelUse &use : kernel.uses) {
      json.beginObject();
      json.member("program", use.program);
      json.member("op", use.op);
      json.endObject();
    }
    json.endArray();
    json.endObject();
  }

  void writeCoverage(const CudaSection &section) {
    json.key("coverage");
    json.beginObject();
    json.member("ops", section.ops);
    json.member("with_kernel", section.opsWithKernel);
    json.key("without_kernel");
    json.beginObject();
    for (const auto &[program, ops] : section.opsWithoutKernel) {
      json.key(program);
      json.beginArray();
      for (const std::string &op : ops)
        json.value(op);
      json.endArray();
    }
    json.endObject();
    json.endObject();
  }

  void writeArg(const CudaArg &arg) {
    json.beginObject();
    switch (arg.kind) {
    case CudaArgKind::Operand:
      json.member("operand", arg.index);
      break;
    case CudaArgKind::Result:
      json.member("result", arg.index);
      break;
    case CudaArgKind::Scratch:
      json.member("scratch", arg.index);
      break;
    case CudaArgKind::I64:
      json.key("i64");
      writeAffine(json, arg.integer);
      break;
    case CudaArgKind::F32:
      json.key("f32");
      writeF32(json, arg.real);
      break;
    case CudaArgKind::Constant:
      json.member("constant", arg.index);
      break;
    case CudaArgKind::StepKey:
      json.key("step_key");
      json.value(true);
      break;
    case CudaArgKind::GroupTable:
      json.key("group_table");
      json.value(true);
      break;
    case CudaArgKind::Tickets:
      json.key("tickets");
      json.value(true);
      break;
    }
    json.endObject();
  }

  void writeGemm(const CudaGemm &g) {
    json.key("gemm");
    json.beginObject();
    json.key("a");
    writeArg(g.a);
    json.key("b");
    writeArg(g.b);
    json.key("c");
    writeArg(g.c);
    const std::pair<const char *, const CudaAffine *> sizes[] = {
        {"m", &g.m},           {"n", &g.n},           {"k", &g.k},
        {"count", &g.count},   {"stride_a", &g.strideA}, {"stride_b", &g.strideB},
        {"stride_c", &g.strideC}};
    for (const auto &[name, value] : sizes) {
      json.key(name);
      writeAffine(json, *value);
    }
    json.member("trans_a", g.transA);
    json.member("trans_b", g.transB);
    json.key("alpha");
    writeF32(json, g.alpha);
    json.key("beta");
    writeF32(json, g.beta);
    if (g.epilogue != CudaGemmEpilogue::None) {
      json.member("epilogue", g.epilogue == CudaGemmEpilogue::Bias ? "bias" : "bias_grad");
      json.key("bias");
      writeArg(g.bias);
    }
    if (g.addend) {
      json.key("addend");
      writeArg(*g.addend);
    }
    if (g.groupSize != 1)
      json.member("group", g.groupSize);
    json.endObject();
  }

  void writeLaunch(const CudaSection &section, const CudaLaunch &launch) {
    json.beginObject();
    if (launch.gemm) {
      writeGemm(*launch.gemm);
      json.endObject();
      return;
    }
    if (launch.kernel < 0 || size_t(launch.kernel) >= section.kernels.size())
      throw Error("the cuda section: a launch names no kernel of the section");
    json.member("kernel", section.kernels[size_t(launch.kernel)].name);
    json.key("args");
    json.beginArray();
    for (const CudaArg &arg : launch.args)
      writeArg(arg);
    json.endArray();
    if (launch.grid) {
      json.key("grid");
      json.beginArray();
      for (const CudaAffine &dim : *launch.grid)
        writeAffine(json, dim);
      json.endArray();
    }
    if (launch.groupSize != 1) {
      json.key("group");
      json.beginObject();
      json.member("size", launch.groupSize);
      json.key("args");
      json.beginArray();
      for (const CudaArg &arg : launch.groupArgs)
        writeArg(arg);
      json.endArray();
      json.endObject();
    }
    json.endObject();
  }

  void writeOpSteps(const CudaSection &section, const CudaOpSteps &op) {
    json.beginObject();
    json.member("op", op.op);
    json.key("scratch");
    json.beginArray();
    for (const CudaAffine &bytes : op.scratchBytes)
      writeAffine(json, bytes);
    json.endArray();
    json.key("launches");
    json.beginArray();
    for (const CudaLaunch &launch : op.launches)
      writeLaunch(section, launch);
    json.endArray();
    json.endObject();
  }

  void writeConstant(const CudaConstant &constant) {
    json.beginObject();
    const bool ints = constant.dtype == DType::I32;
    json.member("type", ints ? "i32" : "f32");
    json.key("values");
    json.beginArray();
    if (ints)
      for (int32_t v : constant.i32)
        json.value(int64_t(v));
    else
      for (float v : constant.f32)
        writeF32(json, v);
    json.endArray();
    json.endObject();
  }

  JsonWriter json;
};

} // namespace

std::string writeCudaSectionJson(const CudaSection &section) {
  return SectionWriter().write(section);
}

} // namespace stringrt
