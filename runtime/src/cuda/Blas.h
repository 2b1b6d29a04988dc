// cuBLAS, opened with dlopen like the driver (Driver.h), so that programs
// linking the runtime start on machines without the CUDA libraries and
// report "cuBLAS is not available: ..." only when a GEMM is asked for.
// STRINGRT_CUBLAS names the library to open instead of
// libcublas.so.<major> (then libcublas.so): the emulator's, in the tests.
#pragma once

#include <cublas_v2.h>

#include <string>

namespace stringrt::cuda::blas {

// The entry points used, with cublas_api.h's prototypes, by their versioned
// symbols (cublasCreate -> cublasCreate_v2).
struct Api {
  decltype(&::cublasCreate_v2) create;
  decltype(&::cublasDestroy_v2) destroy;
  decltype(&::cublasSgemm_v2) sgemm;
  decltype(&::cublasSgemmStridedBatched) sgemmStridedBatched;
  decltype(&::cublasSetStream_v2) setStream;
  decltype(&::cublasSetWorkspace_v2) setWorkspace;
  decltype(&::cublasSetMathMode) setMathMode;
  decltype(&::cublasGetStatusString) getStatusString;
};

// The API, or nullptr with `why` set (library or symbol missing). Loaded
// once per process.
const Api *api(std::string *why = nullptr);
// The API; throws Error("cuBLAS is not available: <why>") when missing.
const Api &require();

} // namespace stringrt::cuda::blas
