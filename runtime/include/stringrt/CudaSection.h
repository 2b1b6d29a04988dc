// The GPU part of a package of target "cuda" (docs/package.md, "Target
// cuda"; docs/cuda.md): the kernel table of the `cuda` metadata entry and each
// kernel's PTX and cubin. Plain data: no CUDA needed to read or validate it.
#pragma once

#include "stringrt/Manifest.h"

#include <cstdint>
#include <string>
#include <vector>

namespace stringrt {

class SafetensorsFile;

// The target name of packages with GPU kernels.
constexpr const char *kCudaTarget = "cuda";

enum class CudaParamKind { Ptr, I64, F32 };
// How the runtime sizes a launch's grid (GPUKernels.h in the compiler):
// Elements: grid-stride over n = the first i64 parameter, blockDim (block[0]);
// Rows: one warp per row, blockDim (32, block[1]), rows = the first i64;
// Columns: one thread per column, columns = the second i64;
// Partials: one warp per block, grid = min(ceil(n / 32), 1024) partials.
enum class CudaGridRule { Elements, Rows, Columns, Partials };

struct CudaKernelUse {
  std::string program; // "forward", "gradients" or "optimizer"
  int64_t op = -1;     // op index in the program; -1 for "optimizer"
};

struct CudaKernel {
  std::string name; // the PTX entry point
  std::string op;   // the pe op it implements ("pe.optimizer" for AdamW)
  std::vector<CudaParamKind> params;
  CudaGridRule grid = CudaGridRule::Elements;
  int64_t blockX = 1, blockY = 1;
  std::string ptx;               // PTX text (JIT-compiled when no cubin fits)
  std::vector<uint8_t> cubin;    // for CudaSection::arch
  std::vector<CudaKernelUse> uses;
};

struct CudaSection {
  std::string arch; // "sm_90": the cubins' architecture
  std::vector<CudaKernel> kernels;
  // How many compute ops of the two programs have a kernel, and the op
  // names of those that do not (per program), as the compiler saw them.
  int64_t ops = 0, opsWithKernel = 0;
  std::vector<std::pair<std::string, std::vector<std::string>>> opsWithoutKernel;

  // nullptr when there is no kernel of that name.
  const CudaKernel *find(std::string_view name) const;
};

// Parses and validates the `cuda` metadata JSON of the package `path`
// against its tensors (`ptx.<kernel>` and `cubin.<kernel>`, U8, nothing
// else) and its manifest (uses name existing ops of the kernel's op kind).
// Throws Error("<path>: ...").
CudaSection parseCudaSection(const std::string &json, const SafetensorsFile &file,
                             const Manifest &manifest, const std::string &path);

const char *cudaParamKindName(CudaParamKind kind);
const char *cudaGridRuleName(CudaGridRule rule);

} // namespace stringrt
