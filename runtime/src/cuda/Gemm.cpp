// Gemm: row-major SGEMM on cuBLAS (CudaBackend.h). cuBLAS is column-major;
// a row-major [M,N] matrix is its column-major transpose, so C = op(A) op(B)
// is computed as C^T = op(B)^T op(A)^T with the operands swapped. cuBLAS is
// opened at run time (Blas.h).
#include "Blas.h"

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

int asInt(int64_t value, const std::string &step, const char *what) {
  if (value < 0 || value > std::numeric_limits<int>::max())
    throw Error(fmt::format("{}: GEMM {} = {} is out of cuBLAS's int range", step, what, value));
  return int(value);
}

} // namespace

Gemm::Gemm(std::shared_ptr<Device> device) : device_(std::move(device)) {
  cublasHandle_t handle = nullptr;
  checkBlas(blas::require().create(&handle), "creating the cuBLAS handle", "cublasCreate");
  handle_ = handle;
}

Gemm::~Gemm() {
  if (const blas::Api *api = blas::api(); api && handle_)
    api->destroy(cublasHandle_t(handle_));
}

void Gemm::run(bool transA, bool transB, int64_t M, int64_t N, int64_t K, float alpha, uint64_t A,
               uint64_t B, float beta, uint64_t C, const std::string &step) const {
  int m = asInt(M, step, "M"), n = asInt(N, step, "N"), k = asInt(K, step, "K");
  if (m == 0 || n == 0)
    return;
  int lda = std::max(1, transA ? m : k);
  int ldb = std::max(1, transB ? k : n);
  checkBlas(blas::require().sgemm(cublasHandle_t(handle_), transB ? CUBLAS_OP_T : CUBLAS_OP_N,
                                  transA ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &alpha,
                                  reinterpret_cast<const float *>(B), ldb,
                                  reinterpret_cast<const float *>(A), lda, &beta,
                                  reinterpret_cast<float *>(C), n),
            step, "cublasSgemm");
}

void Gemm::runStridedBatched(bool transA, bool transB, int64_t M, int64_t N, int64_t K,
                             float alpha, uint64_t A, int64_t strideA, uint64_t B,
                             int64_t strideB, float beta, uint64_t C, int64_t strideC,
                             int64_t count, const std::string &step) const {
  if (count == 1) {
    run(transA, transB, M, N, K, alpha, A, B, beta, C, step);
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
  checkBlas(blas::require().sgemmStridedBatched(
                cublasHandle_t(handle_), transB ? CUBLAS_OP_T : CUBLAS_OP_N,
                transA ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &alpha,
                reinterpret_cast<const float *>(B), ldb, strideB,
                reinterpret_cast<const float *>(A), lda, strideA, &beta,
                reinterpret_cast<float *>(C), n, strideC, batches),
            step, "cublasSgemmStridedBatched");
}

void Gemm::setStream(void *stream) {
  checkBlas(blas::require().setStream(cublasHandle_t(handle_), cudaStream_t(stream)),
            "setting the stream", "cublasSetStream");
}

void Gemm::setWorkspace(uint64_t pointer, size_t bytes) {
  checkBlas(blas::require().setWorkspace(cublasHandle_t(handle_),
                                         reinterpret_cast<void *>(pointer), bytes),
            "setting the cuBLAS workspace", "cublasSetWorkspace");
}

void Gemm::setTF32(bool allowed) {
  checkBlas(blas::require().setMathMode(cublasHandle_t(handle_),
                              allowed ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH),
            "setting the cuBLAS math mode", "cublasSetMathMode");
}

} // namespace stringrt::cuda
