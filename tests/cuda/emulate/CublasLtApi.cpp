// The cuBLASLt entries the runtime uses (runtime/src/cuda/BlasLt.h), on the
// host: f32 matmuls with the default epilogue, CUBLASLT_EPILOGUE_BIAS
// (bias[i] added to row i of D, after alpha op(A) op(B) + beta C; C may be
// apart from D, with D's layout, as the runtime's addend) or the bias
// gradients CUBLASLT_EPILOGUE_BGRADA / BGRADB (the sums of op(A) over k,
// D's rows of them, or of op(B) over k, D's columns, written to the bias
// pointer in D's type, as cublasLt.h documents them), through
// the emulator's GEMM (EmulatedGemm.h: inputs rounded as the compute type
// says), queued on the call's stream. What the emulator checks beyond the
// arithmetic:
// - the heuristic offers an algorithm only for what is emulated (f32
//   layouts, 32F compute and scale types, the four epilogues with a bias
//   (or bias gradient) of D's type, as cuBLASLt's type table has it,
//   shapes that agree, alignment preferences of at least 4 bytes, a bias
//   pointer 4-byte aligned) and records the alignment preferences in it;
//   with STRINGRT_EMULATOR_LT_NO_BIAS_GRADIENT set (non-empty), none for
//   the bias-gradient epilogues, as a cuBLASLt without such an algorithm
//   for a shape (what the runtime's fallback is tested with);
// - cublasLtMatmul refuses (CUBLAS_STATUS_INVALID_VALUE, reported) matrices
//   less aligned than the algorithm was chosen for, as a GPU kernel that
//   assumes them would fault, a bias or bias gradient not aligned to its
//   element, and anything outside its allocation.
#include "EmulatedGemm.h"
#include "Emulator.h"

#include <cublasLt.h>
#include <fmt/format.h>

#include <cstdlib>
#include <cstring>
#include <optional>
#include <set>

#define STRINGRT_EMU_EXPORT extern "C" __attribute__((visibility("default")))

namespace stringrt::emulator {
namespace {

struct LtHandle {};

struct MatmulDesc {
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  cudaDataType scale = CUDA_R_32F;
  cublasOperation_t transa = CUBLAS_OP_N, transb = CUBLAS_OP_N;
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  const void *bias = nullptr;
  cudaDataType biasType = CUDA_R_32F;
  cublasLtPointerMode_t pointerMode = CUBLASLT_POINTER_MODE_HOST;
};

struct Layout {
  cudaDataType type = CUDA_R_32F;
  uint64_t rows = 0, cols = 0;
  int64_t ld = 0;
};

struct Preference {
  uint64_t workspace = 0;
  uint32_t alignment[4] = {256, 256, 256, 256}; // A, B, C, D (cuBLASLt's defaults)
};

// What the heuristic writes into cublasLtMatmulAlgo_t.
constexpr uint64_t kAlgoMagic = 0x656d75616c676f31; // "emualgo1"

template <typename T> std::set<T *> &live() {
  static std::set<T *> objects;
  return objects;
}
template <typename T, typename Handle> T *lookup(Handle handle) {
  T *object = reinterpret_cast<T *>(handle);
  return live<T>().count(object) ? object : nullptr;
}
template <typename T, typename Handle> cublasStatus_t create(Handle *out) {
  if (!out)
    return CUBLAS_STATUS_INVALID_VALUE;
  T *object = new T;
  live<T>().insert(object);
  *out = reinterpret_cast<Handle>(object);
  return CUBLAS_STATUS_SUCCESS;
}
template <typename T, typename Handle> cublasStatus_t destroy(Handle handle) {
  T *object = lookup<T>(handle);
  if (!object)
    return CUBLAS_STATUS_INVALID_VALUE;
  live<T>().erase(object);
  delete object;
  return CUBLAS_STATUS_SUCCESS;
}

template <typename T> bool read(const void *buffer, size_t bytes, T &out) {
  if (!buffer || bytes != sizeof(T))
    return false;
  std::memcpy(&out, buffer, sizeof(T));
  return true;
}

// The product's shape, when the descriptors describe one the emulator runs.
struct Shape {
  int m, n, k;
};
std::optional<Shape> shapeOf(const MatmulDesc &d, const Layout &a, const Layout &b,
                             const Layout &c, const Layout &dl) {
  // f32 everywhere, or bf16 A and B with C = D of bf16 or f32 (cuBLASLt's
  // 32F-compute type table), CUBLAS_COMPUTE_32F for bf16 data.
  bool f32 = a.type == CUDA_R_32F && b.type == CUDA_R_32F && c.type == CUDA_R_32F;
  bool bf16 = a.type == CUDA_R_16BF && b.type == CUDA_R_16BF &&
              (c.type == CUDA_R_16BF || c.type == CUDA_R_32F) && d.compute == CUBLAS_COMPUTE_32F;
  if (!(f32 || bf16) || dl.type != c.type)
    return std::nullopt;
  for (const Layout *l : {&a, &b, &c, &dl})
    if (l->ld < int64_t(std::max<uint64_t>(l->rows, 1)) ||
        l->rows > uint64_t(INT32_MAX) || l->cols > uint64_t(INT32_MAX) || l->ld > INT32_MAX)
      return std::nullopt;
  bool ta = d.transa == CUBLAS_OP_T, tb = d.transb == CUBLAS_OP_T;
  uint64_t m = ta ? a.cols : a.rows, k = ta ? a.rows : a.cols;
  uint64_t kb = tb ? b.cols : b.rows, n = tb ? b.rows : b.cols;
  if (k != kb || c.rows != m || c.cols != n || dl.rows != m || dl.cols != n || c.ld != dl.ld)
    return std::nullopt;
  return Shape{int(m), int(n), int(k)};
}

std::optional<InputRounding> roundingOf(cublasComputeType_t type) {
  switch (type) {
  case CUBLAS_COMPUTE_32F:
  case CUBLAS_COMPUTE_32F_PEDANTIC: return InputRounding::None;
  case CUBLAS_COMPUTE_32F_FAST_TF32: return InputRounding::Tf32;
  case CUBLAS_COMPUTE_32F_FAST_16BF: return InputRounding::Bf16;
  default: return std::nullopt;
  }
}

// Whether the epilogue reads or writes the bias pointer.
bool hasBias(cublasLtEpilogue_t e) {
  return e == CUBLASLT_EPILOGUE_BIAS || e == CUBLASLT_EPILOGUE_BGRADA ||
         e == CUBLASLT_EPILOGUE_BGRADB;
}

// The bias (or bias gradient) is of D's type (the emulator accepts no other
// combination).
bool supported(const MatmulDesc &d, const Layout &dl) {
  return roundingOf(d.compute) && d.scale == CUDA_R_32F &&
         (d.transa == CUBLAS_OP_N || d.transa == CUBLAS_OP_T) &&
         (d.transb == CUBLAS_OP_N || d.transb == CUBLAS_OP_T) &&
         d.pointerMode == CUBLASLT_POINTER_MODE_HOST &&
         (d.epilogue == CUBLASLT_EPILOGUE_DEFAULT ||
          (hasBias(d.epilogue) && d.biasType == dl.type));
}

// Whether the heuristic is to offer no algorithm for BGRADA / BGRADB
// (STRINGRT_EMULATOR_LT_NO_BIAS_GRADIENT).
bool biasGradientDeclined(cublasLtEpilogue_t e) {
  const char *knob = std::getenv("STRINGRT_EMULATOR_LT_NO_BIAS_GRADIENT");
  return knob && *knob && (e == CUBLASLT_EPILOGUE_BGRADA || e == CUBLASLT_EPILOGUE_BGRADB);
}

// The bias pointer aligned to its element (D's type).
bool biasAligned(const MatmulDesc &d, const Layout &dl) {
  return d.bias && uint64_t(d.bias) % (dl.type == CUDA_R_16BF ? 2 : 4) == 0;
}

} // namespace
} // namespace stringrt::emulator

using namespace stringrt::emulator;

STRINGRT_EMU_EXPORT cublasStatus_t cublasLtCreate(cublasLtHandle_t *handle) {
  return create<LtHandle>(handle);
}
STRINGRT_EMU_EXPORT cublasStatus_t cublasLtDestroy(cublasLtHandle_t handle) {
  return destroy<LtHandle>(handle);
}

STRINGRT_EMU_EXPORT cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *desc,
                                                            cublasComputeType_t compute,
                                                            cudaDataType_t scale) {
  cublasStatus_t status = create<MatmulDesc>(desc);
  if (status == CUBLAS_STATUS_SUCCESS) {
    lookup<MatmulDesc>(*desc)->compute = compute;
    lookup<MatmulDesc>(*desc)->scale = scale;
  }
  return status;
}
STRINGRT_EMU_EXPORT cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc) {
  return destroy<MatmulDesc>(desc);
}

STRINGRT_EMU_EXPORT cublasStatus_t cublasLtMatmulDescSetAttribute(
    cublasLtMatmulDesc_t handle, cublasLtMatmulDescAttributes_t attribute, const void *buffer,
    size_t bytes) {
  MatmulDesc *d = lookup<MatmulDesc>(handle);
  if (!d)
    return CUBLAS_STATUS_INVALID_VALUE;
  bool ok = false;
  switch (attribute) {
  case CUBLASLT_MATMUL_DESC_COMPUTE_TYPE: ok = read(buffer, bytes, d->compute); break;
  case CUBLASLT_MATMUL_DESC_SCALE_TYPE: ok = read(buffer, bytes, d->scale); break;
  case CUBLASLT_MATMUL_DESC_POINTER_MODE: ok = read(buffer, bytes, d->pointerMode); break;
  case CUBLASLT_MATMUL_DESC_TRANSA: ok = read(buffer, bytes, d->transa); break;
  case CUBLASLT_MATMUL_DESC_TRANSB: ok = read(buffer, bytes, d->transb); break;
  case CUBLASLT_MATMUL_DESC_EPILOGUE: ok = read(buffer, bytes, d->epilogue); break;
  case CUBLASLT_MATMUL_DESC_BIAS_POINTER: ok = read(buffer, bytes, d->bias); break;
  case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE: ok = read(buffer, bytes, d->biasType); break;
  default:
    report(fmt::format("cublasLtMatmulDescSetAttribute: attribute {} is not emulated",
                       int(attribute)));
    return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  return ok ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_INVALID_VALUE;
}

STRINGRT_EMU_EXPORT cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *layout,
                                                              cudaDataType type, uint64_t rows,
                                                              uint64_t cols, int64_t ld) {
  cublasStatus_t status = create<Layout>(layout);
  if (status == CUBLAS_STATUS_SUCCESS)
    *lookup<Layout>(*layout) = Layout{type, rows, cols, ld};
  return status;
}
STRINGRT_EMU_EXPORT cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout) {
  return destroy<Layout>(layout);
}

STRINGRT_EMU_EXPORT cublasStatus_t
cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *preference) {
  return create<Preference>(preference);
}
STRINGRT_EMU_EXPORT cublasStatus_t
cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t preference) {
  return destroy<Preference>(preference);
}

STRINGRT_EMU_EXPORT cublasStatus_t cublasLtMatmulPreferenceSetAttribute(
    cublasLtMatmulPreference_t handle, cublasLtMatmulPreferenceAttributes_t attribute,
    const void *buffer, size_t bytes) {
  Preference *p = lookup<Preference>(handle);
  if (!p)
    return CUBLAS_STATUS_INVALID_VALUE;
  bool ok = false;
  switch (attribute) {
  case CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES: ok = read(buffer, bytes, p->workspace); break;
  case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES: ok = read(buffer, bytes, p->alignment[0]); break;
  case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES: ok = read(buffer, bytes, p->alignment[1]); break;
  case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES: ok = read(buffer, bytes, p->alignment[2]); break;
  case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES: ok = read(buffer, bytes, p->alignment[3]); break;
  default:
    report(fmt::format("cublasLtMatmulPreferenceSetAttribute: attribute {} is not emulated",
                       int(attribute)));
    return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  return ok ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_INVALID_VALUE;
}

STRINGRT_EMU_EXPORT cublasStatus_t cublasLtMatmulAlgoGetHeuristic(
    cublasLtHandle_t handle, cublasLtMatmulDesc_t descHandle, cublasLtMatrixLayout_t a,
    cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
    cublasLtMatmulPreference_t preferenceHandle, int requested,
    cublasLtMatmulHeuristicResult_t *results, int *returned) {
  MatmulDesc *desc = lookup<MatmulDesc>(descHandle);
  Layout *la = lookup<Layout>(a), *lb = lookup<Layout>(b), *lc = lookup<Layout>(c),
         *ld = lookup<Layout>(d);
  Preference *preference = lookup<Preference>(preferenceHandle);
  if (!lookup<LtHandle>(handle) || !desc || !la || !lb || !lc || !ld || !preference ||
      requested < 1 || !results || !returned)
    return CUBLAS_STATUS_INVALID_VALUE;
  *returned = 0;
  bool aligned = true;
  for (uint32_t alignment : preference->alignment)
    aligned = aligned && alignment >= 4;
  if (!supported(*desc, *ld) || !shapeOf(*desc, *la, *lb, *lc, *ld) || !aligned ||
      (hasBias(desc->epilogue) && uint64_t(desc->bias) % 4 != 0) ||
      biasGradientDeclined(desc->epilogue))
    return CUBLAS_STATUS_NOT_SUPPORTED; // as cuBLASLt does when no algorithm fits
  cublasLtMatmulHeuristicResult_t result{};
  result.algo.data[0] = kAlgoMagic;
  for (int i = 0; i < 4; ++i)
    result.algo.data[1 + i] = preference->alignment[i];
  result.workspaceSize = 0;
  result.state = CUBLAS_STATUS_SUCCESS;
  result.wavesCount = 1.0f;
  results[0] = result;
  *returned = 1;
  return CUBLAS_STATUS_SUCCESS;
}

STRINGRT_EMU_EXPORT cublasStatus_t cublasLtMatmul(
    cublasLtHandle_t handle, cublasLtMatmulDesc_t descHandle, const void *alpha, const void *A,
    cublasLtMatrixLayout_t a, const void *B, cublasLtMatrixLayout_t b, const void *beta,
    const void *C, cublasLtMatrixLayout_t c, void *D, cublasLtMatrixLayout_t d,
    const cublasLtMatmulAlgo_t *algo, void *workspace, size_t workspaceBytes,
    cudaStream_t stream) {
  MatmulDesc *desc = lookup<MatmulDesc>(descHandle);
  Layout *la = lookup<Layout>(a), *lb = lookup<Layout>(b), *lc = lookup<Layout>(c),
         *ld = lookup<Layout>(d);
  if (!lookup<LtHandle>(handle) || !desc || !la || !lb || !lc || !ld || !alpha || !beta)
    return CUBLAS_STATUS_INVALID_VALUE;
  std::optional<Shape> shape = shapeOf(*desc, *la, *lb, *lc, *ld);
  if (!supported(*desc, *ld) || !shape) {
    report("cublasLtMatmul: descriptors the emulator does not run (see CublasLtApi.cpp)");
    return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  if (!algo || algo->data[0] != kAlgoMagic) {
    report("cublasLtMatmul: the algorithm does not come from cublasLtMatmulAlgoGetHeuristic");
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  const void *pointers[4] = {A, B, C, D};
  const char *names = "ABCD";
  for (int i = 0; i < 4; ++i)
    if (uint64_t(pointers[i]) % algo->data[1 + i] != 0) {
      report(fmt::format("cublasLtMatmul: matrix {} at {} is not {}-byte aligned, as the "
                         "algorithm was chosen for (CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_{}_BYTES)",
                         names[i], pointers[i], algo->data[1 + i], names[i]));
      return CUBLAS_STATUS_INVALID_VALUE;
    }
  float alphaValue = *static_cast<const float *>(alpha);
  float betaValue = *static_cast<const float *>(beta);
  if (workspaceBytes && !insideAllocation(uint64_t(workspace), workspaceBytes,
                                          "cublasLtMatmul workspace"))
    return CUBLAS_STATUS_INVALID_VALUE;
  const float *bias = nullptr;
  const bool bf16 = la->type == CUDA_R_16BF, bf16Out = ld->type == CUDA_R_16BF;
  if (hasBias(desc->epilogue) && !biasAligned(*desc, *ld)) {
    report(fmt::format("cublasLtMatmul: {} without an aligned bias pointer",
                       desc->epilogue == CUBLASLT_EPILOGUE_BIAS     ? "CUBLASLT_EPILOGUE_BIAS"
                       : desc->epilogue == CUBLASLT_EPILOGUE_BGRADA ? "CUBLASLT_EPILOGUE_BGRADA"
                                                                    : "CUBLASLT_EPILOGUE_BGRADB"));
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  if (desc->epilogue == CUBLASLT_EPILOGUE_BIAS)
    bias = static_cast<const float *>(desc->bias);
  GemmShape g{desc->transa == CUBLAS_OP_T,
              desc->transb == CUBLAS_OP_T,
              shape->m,
              shape->n,
              shape->k,
              alphaValue,
              betaValue,
              static_cast<const float *>(A),
              int(la->ld),
              0,
              static_cast<const float *>(B),
              int(lb->ld),
              0,
              static_cast<float *>(D),
              int(ld->ld),
              0,
              1,
              bf16 ? InputRounding::None : *roundingOf(desc->compute),
              bias};
  g.bf16Inputs = bf16;
  g.bf16Output = bf16Out;
  // Written by the epilogue: the BIAS_POINTER of a bias gradient is void *.
  if (desc->epilogue == CUBLASLT_EPILOGUE_BGRADA)
    g.biasGradA = static_cast<float *>(const_cast<void *>(desc->bias));
  if (desc->epilogue == CUBLASLT_EPILOGUE_BGRADB)
    g.biasGradB = static_cast<float *>(const_cast<void *>(desc->bias));
  if (C != D)
    g.source = static_cast<const float *>(C);
  return enqueueGemm(reinterpret_cast<CUstream>(stream), g, "cublasLtMatmul");
}

// The configuration of an algorithm the heuristic offered: the emulator has
// one (id 0, tile 0, stages 0, no split-K).
STRINGRT_EMU_EXPORT cublasStatus_t cublasLtMatmulAlgoConfigGetAttribute(
    const cublasLtMatmulAlgo_t *algo, cublasLtMatmulAlgoConfigAttributes_t attribute,
    void *buffer, size_t bytes, size_t *written) {
  if (!algo || algo->data[0] != kAlgoMagic || !buffer)
    return CUBLAS_STATUS_INVALID_VALUE;
  uint32_t value = 0;
  switch (attribute) {
  case CUBLASLT_ALGO_CONFIG_ID:
  case CUBLASLT_ALGO_CONFIG_TILE_ID:
  case CUBLASLT_ALGO_CONFIG_STAGES_ID: value = 0; break;
  case CUBLASLT_ALGO_CONFIG_SPLITK_NUM: value = 1; break;
  default:
    report(fmt::format("cublasLtMatmulAlgoConfigGetAttribute: attribute {} is not emulated",
                       int(attribute)));
    return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  if (bytes < sizeof value)
    return CUBLAS_STATUS_INVALID_VALUE;
  std::memcpy(buffer, &value, sizeof value);
  if (written)
    *written = sizeof value;
  return CUBLAS_STATUS_SUCCESS;
}

STRINGRT_EMU_EXPORT const char *cublasLtGetStatusString(cublasStatus_t status) {
  return cublasGetStatusString(status);
}
