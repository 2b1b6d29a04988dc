// CublasGemm: row-major GEMMs on cuBLAS (CudaBackend.h). cuBLAS is column-major;
// a row-major [M,N] matrix is its column-major transpose, so C = op(A) op(B)
// is computed as C^T = op(B)^T op(A)^T with the operands swapped. cuBLAS and
// cuBLASLt are opened at run time (Blas.h, BlasLt.h).
//
// Every GEMM names its arithmetic (GemmPrecision) through the compute type
// of cublasGemmEx / cublasGemmStridedBatchedEx (f32 data, f32 scale type),
// so no handle-wide math mode decides it behind the caller's back.
#include "Blas.h"
#include "BlasLt.h"

#include "stringrt/Error.h"
#include "stringrt/cuda/CudaBackend.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

namespace stringrt::cuda {
namespace {

void checkBlas(cublasStatus_t status, const std::string &step, const char *call) {
  if (status != CUBLAS_STATUS_SUCCESS)
    throw Error(fmt::format("cuBLAS error in {}: {} failed: {}", step, call,
                            blas::require().getStatusString(status)));
}

void checkLt(cublasStatus_t status, const std::string &step, const char *call) {
  if (status != CUBLAS_STATUS_SUCCESS)
    throw Error(fmt::format("cuBLASLt error in {}: {} failed: {}", step, call,
                            blaslt::api()->getStatusString(status)));
}

int asInt(int64_t value, const std::string &step, const char *what) {
  if (value < 0 || value > std::numeric_limits<int>::max())
    throw Error(fmt::format("{}: GEMM {} = {} is out of cuBLAS's int range", step, what, value));
  return int(value);
}

cublasComputeType_t computeType(GemmPrecision precision) {
  switch (precision) {
  case GemmPrecision::Fp32: return CUBLAS_COMPUTE_32F;
  case GemmPrecision::Tf32: return CUBLAS_COMPUTE_32F_FAST_TF32;
  case GemmPrecision::Bf16: return CUBLAS_COMPUTE_32F_FAST_16BF;
  }
  return CUBLAS_COMPUTE_32F;
}

// The largest power of two (at most 256) dividing `address`: what cuBLASLt
// may assume of a matrix's alignment (CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_*).
uint32_t alignmentOf(uint64_t address) {
  uint32_t alignment = 1;
  while (alignment < 256 && address % (alignment * 2) == 0)
    alignment *= 2;
  return alignment;
}

// cuBLASLt descriptors, destroyed when the call is done with them.
struct LtCall {
  const blaslt::Api &lt;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulPreference_t preference = nullptr;
  ~LtCall() {
    if (preference)
      lt.preferenceDestroy(preference);
    for (cublasLtMatrixLayout_t layout : {a, b, c})
      if (layout)
        lt.matrixLayoutDestroy(layout);
    if (desc)
      lt.matmulDescDestroy(desc);
  }
};

} // namespace

const char *gemmPrecisionName(GemmPrecision precision) {
  switch (precision) {
  case GemmPrecision::Fp32: return "fp32";
  case GemmPrecision::Tf32: return "tf32";
  case GemmPrecision::Bf16: return "bf16";
  }
  return "?";
}

Gemm::Gemm(std::shared_ptr<Device> device) : device_(std::move(device)) {
  cublasHandle_t handle = nullptr;
  checkBlas(blas::require().create(&handle), "creating the cuBLAS handle", "cublasCreate");
  handle_ = handle;
  // Without cuBLASLt (or a handle of it) bias epilogues take the fallback.
  if (const blaslt::Api *lt = blaslt::api()) {
    cublasLtHandle_t ltHandle = nullptr;
    if (lt->create(&ltHandle) == CUBLAS_STATUS_SUCCESS)
      ltHandle_ = ltHandle;
  }
}

Gemm::~Gemm() {
  if (const blas::Api *api = blas::api(); api && handle_)
    api->destroy(cublasHandle_t(handle_));
  if (const blaslt::Api *lt = blaslt::api(); lt && ltHandle_)
    lt->destroy(cublasLtHandle_t(ltHandle_));
}

namespace {
cudaDataType dataType(DType type) { return type == DType::BF16 ? CUDA_R_16BF : CUDA_R_32F; }
// bf16 data is exact in f32: its products are taken in f32 (the tensor
// cores' bf16 path), whatever the package's precision says of f32 data.
cublasComputeType_t computeFor(GemmPrecision precision, DType inputs) {
  return inputs == DType::BF16 ? CUBLAS_COMPUTE_32F : computeType(precision);
}
void checkTypes(DType inputs, DType output, const std::string &step) {
  if ((inputs != DType::F32 && inputs != DType::BF16) ||
      (output != DType::F32 && output != DType::BF16) ||
      (output == DType::BF16 && inputs != DType::BF16))
    throw Error(fmt::format("{}: GEMM types {} x {} -> {} are not supported", step,
                            dtypeName(inputs), dtypeName(inputs), dtypeName(output)));
}
} // namespace

void Gemm::run(bool transA, bool transB, int64_t M, int64_t N, int64_t K, float alpha, uint64_t A,
               uint64_t B, float beta, uint64_t C, const std::string &step,
               GemmPrecision precision, DType inputs, DType output) const {
  checkTypes(inputs, output, step);
  int m = asInt(M, step, "M"), n = asInt(N, step, "N"), k = asInt(K, step, "K");
  if (m == 0 || n == 0)
    return;
  if (inputs == DType::BF16 &&
      runLt(transA, transB, M, N, K, alpha, A, B, beta, C, 0, step, precision, inputs, output))
    return;
  int lda = std::max(1, transA ? m : k);
  int ldb = std::max(1, transB ? k : n);
  checkBlas(blas::require().gemmEx(cublasHandle_t(handle_), transB ? CUBLAS_OP_T : CUBLAS_OP_N,
                                   transA ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &alpha,
                                   reinterpret_cast<const void *>(B), dataType(inputs), ldb,
                                   reinterpret_cast<const void *>(A), dataType(inputs), lda, &beta,
                                   reinterpret_cast<void *>(C), dataType(output), n,
                                   computeFor(precision, inputs), CUBLAS_GEMM_DEFAULT),
            step, "cublasGemmEx");
}

void Gemm::runStridedBatched(bool transA, bool transB, int64_t M, int64_t N, int64_t K,
                             float alpha, uint64_t A, int64_t strideA, uint64_t B,
                             int64_t strideB, float beta, uint64_t C, int64_t strideC,
                             int64_t count, const std::string &step,
                             GemmPrecision precision) const {
  if (count == 1) {
    run(transA, transB, M, N, K, alpha, A, B, beta, C, step, precision);
    return;
  }
  int m = asInt(M, step, "M"), n = asInt(N, step, "N"), k = asInt(K, step, "K");
  int batches = asInt(count, step, "count");
  if (m == 0 || n == 0 || batches == 0)
    return;
  if (strideA < 0 || strideB < 0 || strideC < int64_t(m) * n)
    throw Error(fmt::format("{}: GEMM strides ({}, {}, {}) are negative or overlap C", step,
                            strideA, strideB, strideC));
  int lda = std::max(1, transA ? m : k);
  int ldb = std::max(1, transB ? k : n);
  // Column-major: C^T = op(B)^T op(A)^T, so B's stride comes first.
  checkBlas(blas::require().gemmStridedBatchedEx(
                cublasHandle_t(handle_), transB ? CUBLAS_OP_T : CUBLAS_OP_N,
                transA ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &alpha,
                reinterpret_cast<const void *>(B), CUDA_R_32F, ldb, strideB,
                reinterpret_cast<const void *>(A), CUDA_R_32F, lda, strideA, &beta,
                reinterpret_cast<void *>(C), CUDA_R_32F, n, strideC, batches,
                computeType(precision), CUBLAS_GEMM_DEFAULT),
            step, "cublasGemmStridedBatchedEx");
}

void Gemm::runGrouped(bool transA, bool transB, int64_t M, int64_t N, int64_t K, float alpha,
                      float beta, uint64_t pointers, int64_t count, const std::string &step,
                      GemmPrecision precision, DType inputs, DType output) const {
  checkTypes(inputs, output, step);
  int m = asInt(M, step, "M"), n = asInt(N, step, "N"), k = asInt(K, step, "K");
  int batches = asInt(count, step, "count");
  if (m == 0 || n == 0 || batches == 0)
    return;
  int lda = std::max(1, transA ? m : k);
  int ldb = std::max(1, transB ? k : n);
  auto array = [&](int which) {
    return reinterpret_cast<void *const *>(pointers + uint64_t(which) * uint64_t(count) * 8);
  };
  // Column-major: C^T = op(B)^T op(A)^T, so B's pointers come first.
  checkBlas(blas::require().gemmBatchedEx(
                cublasHandle_t(handle_), transB ? CUBLAS_OP_T : CUBLAS_OP_N,
                transA ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &alpha, array(0), dataType(inputs),
                ldb, array(1), dataType(inputs), lda, &beta, array(2), dataType(output), n,
                batches, computeFor(precision, inputs), CUBLAS_GEMM_DEFAULT),
            step, "cublasGemmBatchedEx");
}

bool Gemm::runWithBias(bool transA, bool transB, int64_t M, int64_t N, int64_t K, float alpha,
                       uint64_t A, uint64_t B, uint64_t bias, uint64_t C,
                       const std::string &step, GemmPrecision precision, DType inputs,
                       DType output) const {
  // 16 bytes: the alignment the bias epilogue is known to need on hardware
  // (cuBLASLt documents none, but its heuristic reads the pointer's).
  if (bias == 0 || bias % 16 != 0)
    return false;
  return runLt(transA, transB, M, N, K, alpha, A, B, 0.0f, C, bias, step, precision, inputs,
               output);
}

bool Gemm::runWithBiasGradient(bool transA, bool transB, int64_t M, int64_t N, int64_t K,
                               float alpha, uint64_t A, uint64_t B, uint64_t biasGrad, uint64_t C,
                               const std::string &step, GemmPrecision precision, DType inputs,
                               DType output) const {
  // 16 bytes, as the bias epilogue's (runWithBias).
  if (biasGrad == 0 || biasGrad % 16 != 0)
    return false;
  return runLt(transA, transB, M, N, K, alpha, A, B, 0.0f, C, biasGrad, step, precision, inputs,
               output, /*addend=*/0, /*biasGradient=*/true);
}

bool Gemm::runWithAddend(bool transA, bool transB, int64_t M, int64_t N, int64_t K, float alpha,
                         uint64_t A, uint64_t B, float beta, uint64_t addend, uint64_t bias,
                         uint64_t C, const std::string &step, GemmPrecision precision,
                         DType inputs, DType output) const {
  if (addend == 0 || (bias != 0 && bias % 16 != 0))
    return false;
  return runLt(transA, transB, M, N, K, alpha, A, B, beta, C, bias, step, precision, inputs,
               output, addend);
}

bool Gemm::runLt(bool transA, bool transB, int64_t M, int64_t N, int64_t K, float alpha,
                 uint64_t A, uint64_t B, float beta, uint64_t C, uint64_t bias,
                 const std::string &step, GemmPrecision precision, DType inputs, DType output,
                 uint64_t addend, bool biasGradient) const {
  // cuBLASLt's C (what beta scales) is the addend; its D, our C, is written.
  const uint64_t source = addend ? addend : C;
  checkTypes(inputs, output, step);
  const blaslt::Api *lt = blaslt::api();
  if (!lt || !ltHandle_)
    return false;
  int m = asInt(M, step, "M"), n = asInt(N, step, "N"), k = asInt(K, step, "K");
  if (m == 0 || n == 0 || k == 0)
    return false; // nothing to multiply: the caller's plain path handles it
  // Column-major D^T [N, M] = op(B)^T op(A)^T: cuBLASLt's A is our B, its B
  // our A. A layout describes the stored matrix (before the transpose).
  LtCall call{*lt};
  cublasOperation_t opB = transB ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t opA = transA ? CUBLAS_OP_T : CUBLAS_OP_N;
  // Our B, whose sums over K a bias gradient is, is cuBLASLt's A: BGRADA
  // (its bias vector is of D's type, written; D's rows are our N).
  cublasLtEpilogue_t epilogue = !bias          ? CUBLASLT_EPILOGUE_DEFAULT
                                : biasGradient ? CUBLASLT_EPILOGUE_BGRADA
                                               : CUBLASLT_EPILOGUE_BIAS;
  if (biasGradient && (addend || beta != 0.0f))
    throw Error(fmt::format("{}: a bias-gradient GEMM takes beta 0 and no addend", step));
  cudaDataType biasType = dataType(output), in = dataType(inputs), out = dataType(output);
  const void *biasPointer = reinterpret_cast<const void *>(bias);
  checkLt(lt->matmulDescCreate(&call.desc, computeFor(precision, inputs), CUDA_R_32F), step,
          "cublasLtMatmulDescCreate");
  auto set = [&](cublasLtMatmulDescAttributes_t attribute, const void *value, size_t bytes) {
    checkLt(lt->matmulDescSetAttribute(call.desc, attribute, value, bytes), step,
            "cublasLtMatmulDescSetAttribute");
  };
  set(CUBLASLT_MATMUL_DESC_TRANSA, &opB, sizeof opB);
  set(CUBLASLT_MATMUL_DESC_TRANSB, &opA, sizeof opA);
  set(CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue);
  if (bias) {
    set(CUBLASLT_MATMUL_DESC_BIAS_POINTER, &biasPointer, sizeof biasPointer);
    set(CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &biasType, sizeof biasType);
  }
  // Our B stored row-major [K, N] (or [N, K]) is column-major [N, K] (or [K, N]).
  checkLt(lt->matrixLayoutCreate(&call.a, in, transB ? k : n, transB ? n : k, transB ? k : n),
          step, "cublasLtMatrixLayoutCreate");
  checkLt(lt->matrixLayoutCreate(&call.b, in, transA ? m : k, transA ? k : m, transA ? m : k),
          step, "cublasLtMatrixLayoutCreate");
  checkLt(lt->matrixLayoutCreate(&call.c, out, n, m, n), step, "cublasLtMatrixLayoutCreate");
  checkLt(lt->preferenceCreate(&call.preference), step, "cublasLtMatmulPreferenceCreate");
  uint64_t workspace = workspaceBytes_;
  checkLt(lt->preferenceSetAttribute(call.preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                     &workspace, sizeof workspace),
          step, "cublasLtMatmulPreferenceSetAttribute");
  const std::pair<cublasLtMatmulPreferenceAttributes_t, uint64_t> alignments[] = {
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, B},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, A},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, source},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, C}};
  for (const auto &[attribute, address] : alignments) {
    uint32_t alignment = alignmentOf(address);
    checkLt(lt->preferenceSetAttribute(call.preference, attribute, &alignment, sizeof alignment),
            step, "cublasLtMatmulPreferenceSetAttribute");
  }
  cublasLtMatmulHeuristicResult_t heuristic{};
  int found = 0;
  cublasStatus_t status =
      lt->algoGetHeuristic(cublasLtHandle_t(ltHandle_), call.desc, call.a, call.b, call.c, call.c,
                           call.preference, 1, &heuristic, &found);
  if (status == CUBLAS_STATUS_NOT_SUPPORTED || (status == CUBLAS_STATUS_SUCCESS && found == 0))
    return false; // no algorithm for this shape and these alignments
  checkLt(status, step, "cublasLtMatmulAlgoGetHeuristic");
  recordAlgorithm(lt, &heuristic.algo, inputs, output, transA, transB, m, n, k,
                  !bias ? "" : biasGradient ? " +bias-gradient (BGRADA)" : " +bias",
                  addend != 0);
  checkLt(lt->matmul(cublasLtHandle_t(ltHandle_), call.desc, &alpha,
                     reinterpret_cast<const void *>(B), call.a, reinterpret_cast<const void *>(A),
                     call.b, &beta, reinterpret_cast<const void *>(source), call.c,
                     reinterpret_cast<void *>(C), call.c, &heuristic.algo,
                     reinterpret_cast<void *>(workspace_), workspaceBytes_,
                     cudaStream_t(stream_)),
          step, "cublasLtMatmul");
  return true;
}

void Gemm::recordAlgorithm(const void *ltApi, const void *algoPointer, DType inputs,
                           DType output, bool transA, bool transB, int m, int n, int k,
                           const char *epilogue, bool addend) const {
  const blaslt::Api &lt = *static_cast<const blaslt::Api *>(ltApi);
  const cublasLtMatmulAlgo_t &algo = *static_cast<const cublasLtMatmulAlgo_t *>(algoPointer);
  std::string shape = fmt::format("{} x {} -> {}{}{} m {} n {} k {}{}{}", dtypeName(inputs),
                                  dtypeName(inputs), dtypeName(output), transA ? " A^T" : "",
                                  transB ? " B^T" : "", m, n, k, epilogue,
                                  addend ? " +addend" : "");
  for (const std::string &line : algorithms_)
    if (line.compare(0, shape.size() + 1, shape + ":") == 0)
      return;
  auto attribute = [&](cublasLtMatmulAlgoConfigAttributes_t which) -> int64_t {
    uint32_t value = 0;
    size_t written = 0;
    if (lt.algoConfigGetAttribute(&algo, which, &value, sizeof value, &written) !=
        CUBLAS_STATUS_SUCCESS)
      return -1;
    return int64_t(value);
  };
  algorithms_.push_back(fmt::format("{}: algorithm {}, tile {}, stages {}, split-k {}", shape,
                                    attribute(CUBLASLT_ALGO_CONFIG_ID),
                                    attribute(CUBLASLT_ALGO_CONFIG_TILE_ID),
                                    attribute(CUBLASLT_ALGO_CONFIG_STAGES_ID),
                                    attribute(CUBLASLT_ALGO_CONFIG_SPLITK_NUM)));
}

std::vector<std::string> Gemm::chosenAlgorithms() const { return algorithms_; }

std::string Gemm::biasEpilogueUnavailable() const {
  std::string why;
  if (!blaslt::api(&why))
    return "cuBLASLt is not available: " + why;
  if (!ltHandle_)
    return "cublasLtCreate failed";
  return "";
}

void Gemm::axpy(int64_t n, float alpha, uint64_t x, uint64_t y, const std::string &step) const {
  const int count = asInt(n, step, "n");
  if (count == 0)
    return;
  checkBlas(blas::require().saxpy(cublasHandle_t(handle_), count, &alpha,
                                  reinterpret_cast<const float *>(x), 1,
                                  reinterpret_cast<float *>(y), 1),
            step, "cublasSaxpy");
}

void Gemm::setStream(void *stream) {
  checkBlas(blas::require().setStream(cublasHandle_t(handle_), cudaStream_t(stream)),
            "setting the stream", "cublasSetStream");
  stream_ = stream;
}

void Gemm::setWorkspace(uint64_t pointer, size_t bytes) {
  checkBlas(blas::require().setWorkspace(cublasHandle_t(handle_),
                                         reinterpret_cast<void *>(pointer), bytes),
            "setting the cuBLAS workspace", "cublasSetWorkspace");
  workspace_ = pointer;
  workspaceBytes_ = bytes;
}

} // namespace stringrt::cuda
