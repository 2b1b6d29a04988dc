// The pure half of the device executor (DeviceExecutor.h): where each value
// of a program lives on the device at a batch size, how an op's scratch
// buffers are laid out, and a step program launch bound to device pointers,
// integers and a grid. No device or driver is needed, so all of it is unit
// tested on machines without a GPU (runtime/tests/cuda/StepBindingTest.cpp).
#pragma once

#include "stringrt/CudaSection.h"
#include "stringrt/Manifest.h"
#include "stringrt/cuda/CudaBackend.h"

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace stringrt::cuda {

// Byte alignment of the buffers the executor carves (cuBLAS and coalesced
// access like 256).
constexpr uint64_t kDeviceAlignment = 256;

// The device region a value lives in.
enum class Region {
  None,   // not a value of the program (unused id)
  Params, // a slice of the flat parameter buffer (pe.get_param)
  ParamsBf16, // a slice of the bf16 copy of the parameters (a bf16 pe.get_param)
  Arena,  // the program's arena (the package's arena plan), at this batch
  Extra,  // the executor's own per-batch buffer: inputs, constants, i32
          // results and f32 results outside the plan
};

struct ValuePlace {
  Region region = Region::None;
  uint64_t offset = 0; // bytes from the region's base
  uint64_t bytes = 0;
};

struct ProgramPlacement {
  std::vector<ValuePlace> values; // by ValueId
  uint64_t arenaBytes = 0;
  uint64_t extraBytes = 0;
};

// Where the parameters live in the device's flat buffers (parameters,
// gradients, optimizer moments): in manifest order, each at a multiple of
// kDeviceAlignment bytes so that every GEMM operand is aligned (cuBLAS picks
// its 16-byte "align4" kernels only then), zeros between them. `offsets` and
// `total` count floats.
struct DeviceParamLayout {
  std::vector<int64_t> offsets;
  int64_t total = 0;
};
DeviceParamLayout deviceParameterLayout(const Manifest &manifest);

// ZeRO-1 on GPU ranks (DeviceOptions::zeroStage): those flat buffers of
// `total` floats cut into `ranks` slices of `floats` each, padded with zeros
// to `padded` = ranks x floats (NCCL's reduce-scatter and all-gather take
// one count for every rank); each slice a multiple of kDeviceAlignment
// bytes, so that every rank's begins aligned. Rank r's is [r floats,
// (r + 1) floats); the last ones may lie past `total` in part or whole.
struct DeviceZeroSlices {
  int64_t floats = 0;
  int64_t padded = 0;
};
DeviceZeroSlices deviceZeroSlices(int64_t total, int ranks);

// Places every value of `program` at `batch`: get_param results at their
// parameter's offset (deviceParameterLayout), arena members at their slot
// (arenaLayout of the plan's byte-sized slots, each rounded up to 256 bytes;
// without a plan every f32 op result goes to Extra), the rest in Extra, each
// 256-byte aligned. Throws Error naming the program for an unknown parameter.
// With `steps`, each value's `bytes` are those of its stored type (a bf16
// value's 2 an element), and a pe.get_param result the steps store in bf16
// is placed in ParamsBf16 at the same element offset.
ProgramPlacement placeValues(const Manifest &manifest, const Program &program,
                             const std::string &name, int64_t batch,
                             const CudaProgramSteps *steps = nullptr);

// Byte offsets of an op's scratch buffers in one scratch block, 256-byte
// aligned; `bytes` is the block's size.
struct ScratchLayout {
  std::vector<uint64_t> offsets;
  uint64_t bytes = 0;
};
ScratchLayout scratchLayout(const CudaOpSteps &steps, int64_t batch);

// Byte offsets of the section's constant arrays in one device buffer,
// 256-byte aligned; `bytes` is the buffer's size. The device executor uploads
// them there once, when the model is created.
struct ConstantLayout {
  std::vector<uint64_t> offsets;
  uint64_t bytes = 0;
};
ConstantLayout constantLayout(const CudaSection &section);

// The device addresses an op's launches see: its operands, results and
// scratch buffers, the section's constant arrays and the step key buffer
// (the same for every op; 0 when the section reads no step key).
struct OpPointers {
  std::vector<uint64_t> operands, results, scratch, constants;
  uint64_t stepKey = 0;
  // The op's kernel group table (CudaArgKind::GroupTable); 0: none placed.
  uint64_t groupTable = 0;
  // The device model's ticket counters (CudaArgKind::Tickets); 0: none.
  uint64_t tickets = 0;
  // The storage types of the operands and results (CudaProgramSteps::
  // valueDTypes); empty: all F32.
  std::vector<DType> operandTypes, resultTypes;
};

// A GEMM with its sizes evaluated.
struct BoundGemm {
  uint64_t a = 0, b = 0, c = 0;
  int64_t m = 0, n = 0, k = 0, count = 1, strideA = 0, strideB = 0, strideC = 0;
  bool transA = false, transB = false;
  float alpha = 1.0f, beta = 0.0f;
  uint64_t bias = 0; // the bias epilogue's vector (n elements of C's type); 0: none
  // The bias-gradient epilogue's output (n elements of C's type, the sums of
  // op(B) over k; CudaGemmEpilogue::BiasGrad): a result of the next entry's
  // op. 0: none.
  uint64_t biasGrad = 0;
  // What beta scales, read in C's place (m x n of C's type); 0: C itself.
  uint64_t addend = 0;
  // The matrices' element types: F32 or BF16 (A and B alike; the bias C's).
  DType typeA = DType::F32, typeB = DType::F32, typeC = DType::F32;
};

struct BoundLaunch {
  const CudaKernel *kernel = nullptr; // null for a GEMM
  std::vector<KernelArg> args;
  std::optional<std::array<int64_t, 3>> grid; // explicit grids, evaluated
  LaunchShape shape; // a kernel's grid (from its rule or `grid`) and block
  std::optional<BoundGemm> gemm;
  // A kernel launch with no block to run at this batch (a grid rule's size
  // or an explicit grid dimension evaluating to 0): the executor skips it.
  bool empty() const { return kernel && shape.empty(); }
};

// Binds `launch` at `batch`, its grid included (launchShapeFor). Throws
// Error, prefixed with `where`, for a negative size, an explicit grid beyond
// the device limits (x < 2^31, y and z <= 65535), a grid given to a kernel
// of another rule (or missing for an explicit one) or a GEMM whose pointers
// are null. A GEMM with a bias-gradient epilogue binds its bias against
// `next`, the pointers of the next entry's op (required then).
BoundLaunch bindLaunch(const CudaSection &section, const CudaLaunch &launch,
                       const OpPointers &pointers, int64_t batch, const std::string &where,
                       const OpPointers *next = nullptr);

// The members of a grouped GEMM (CudaGemm::groupSize) bound at a batch,
// which one cublasGemmBatchedEx computes at once: throws Error naming the
// member (`names[i]`, e.g. "gradients op 12 (pe.linear_grad_weight)") whose
// C overlaps another member's A, B or C (bytes m k, k n, m n at their
// types), or that differs from the first in a size, transpose, alpha,
// beta or type. The runtime checks this when a batch's buffers are placed.
void checkGemmGroup(const std::vector<BoundGemm> &members, const std::vector<std::string> &names);

// A kernel group's table row of one member (CudaLaunch::groupArgs of the
// group's launch `leader` bound against the member's pointers): throws Error
// prefixed with `where` for an argument without a device address.
std::vector<uint64_t> groupTableRow(const CudaLaunch &leader, const OpPointers &member,
                                    const std::string &where);

// The steps of the members of a kernel group of first launches
// (CudaLaunch::groupSize on the first of several launches), whose group
// launch writes every member's scratch before the members' own launches
// read it, in the one scratch memory where every op's layout starts: throws
// Error naming two members (`names[i]`) whose scratch buffers that a launch
// names meet at `batch` (a buffer no launch names, padding, may).
void checkGroupScratch(const std::vector<const CudaOpSteps *> &members, int64_t batch,
                       const std::vector<std::string> &names);

// Binds every launch of program `name`'s steps at `batch` against the
// placement of its values, without a device: throws Error (naming the op and
// launch) for an op without steps, a binding error (StepBinding above), a
// GEMM whose matrices reach past the value or scratch buffer they are bound
// to (a bias gradient: past the next entry's result), a GEMM matrix that
// is not 16-byte aligned, or a GEMM group whose
// members overlap (checkGemmGroup), or a kernel group of first launches
// whose members' scratch buffers meet (checkGroupScratch). Returns the
// number of launches checked. The device executor's
// walk does the same bindings; tests run this on compiled packages.
int64_t checkProgramSteps(const Manifest &manifest, const CudaSection &section,
                          const std::string &name, int64_t batch);

// The compute ops of `program` that have no steps (each name once, in
// program order, with "xN" when it occurs N > 1 times): the device
// executor refuses a package while this is not empty.
std::vector<std::string> uncoveredOps(const CudaSection &section, const Program &program,
                                      const std::string &name);

} // namespace stringrt::cuda
