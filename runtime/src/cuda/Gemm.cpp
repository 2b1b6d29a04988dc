// Gemm: row-major SGEMM on cuBLAS (CudaBackend.h). cuBLAS is column-major;
// a row-major [M,N] matrix is its column-major transpose, so C = op(A) op(B)
// is computed as C^T = op(B)^T op(A)^T with the operands swapped.
#include "Driver.h"

#include "stringrt/Error.h"
#include "stringrt/cuda/CudaBackend.h"

#include <cublas_v2.h>
#include <fmt/format.h>

#include <algorithm>
#include <limits>

namespace stringrt::cuda {
namespace {

void checkBlas(cublasStatus_t status, const std::string &step, const char *call) {
  if (status != CUBLAS_STATUS_SUCCESS)
    throw Error(fmt::format("cuBLAS error in {}: {} failed: {}", step, call,
                            cublasGetStatusString(status)));
}

int asInt(int64_t value, const std::string &step, const char *what) {
  if (value < 0 || value > std::numeric_limits<int>::max())
    throw Error(fmt::format("{}: GEMM {} = {} is out of cuBLAS's int range", step, what, value));
  return int(value);
}

} // namespace

Gemm::Gemm(std::shared_ptr<Device> device) : device_(std::move(device)) {
  cublasHandle_t handle = nullptr;
  checkBlas(cublasCreate(&handle), "creating the cuBLAS handle", "cublasCreate");
  handle_ = handle;
}

Gemm::~Gemm() {
  if (handle_)
    cublasDestroy(cublasHandle_t(handle_));
}

void Gemm::run(bool transA, bool transB, int64_t M, int64_t N, int64_t K, float alpha, uint64_t A,
               uint64_t B, float beta, uint64_t C, const std::string &step) const {
  int m = asInt(M, step, "M"), n = asInt(N, step, "N"), k = asInt(K, step, "K");
  if (m == 0 || n == 0)
    return;
  int lda = std::max(1, transA ? m : k);
  int ldb = std::max(1, transB ? k : n);
  checkBlas(cublasSgemm(cublasHandle_t(handle_), transB ? CUBLAS_OP_T : CUBLAS_OP_N,
                        transA ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &alpha,
                        reinterpret_cast<const float *>(B), ldb,
                        reinterpret_cast<const float *>(A), lda, &beta,
                        reinterpret_cast<float *>(C), n),
            step, "cublasSgemm");
}

} // namespace stringrt::cuda
