// KernelSet: a package's kernels loaded as driver modules, and checked
// launches (CudaBackend.h).
#include "DriverApi.h"

#include "stringrt/Error.h"
#include "stringrt/cuda/CudaBackend.h"

#include <fmt/format.h>

#include <algorithm>

namespace stringrt::cuda {
namespace {

int64_t nthInteger(const CudaKernel &kernel, const std::vector<KernelArg> &args, int which) {
  int seen = 0;
  for (size_t i = 0; i < args.size(); ++i)
    if (kernel.params[i] == CudaParamKind::I64 && seen++ == which)
      return args[i].i64;
  throw Error(fmt::format("kernel {}: no i64 parameter #{}", kernel.name, which));
}

void checkArgs(const CudaKernel &kernel, const std::vector<KernelArg> &args) {
  if (args.size() != kernel.params.size())
    throw Error(fmt::format("kernel {} takes {} arguments, got {}", kernel.name,
                            kernel.params.size(), args.size()));
  for (size_t i = 0; i < args.size(); ++i)
    if (args[i].kind != kernel.params[i])
      throw Error(fmt::format("kernel {}: argument {} must be {}, got {}", kernel.name, i,
                              cudaParamKindName(kernel.params[i]), cudaParamKindName(args[i].kind)));
  for (size_t i = 0; i < args.size(); ++i)
    if (args[i].kind == CudaParamKind::I64 && args[i].i64 < 0)
      throw Error(fmt::format("kernel {}: size argument {} is negative ({})", kernel.name, i,
                              args[i].i64));
}

} // namespace

LaunchShape launchShapeFor(const CudaKernel &kernel, const std::vector<KernelArg> &args,
                           const std::array<int64_t, 3> *grid) {
  checkArgs(kernel, args);
  LaunchShape shape;
  shape.block[0] = unsigned(kernel.blockX);
  shape.block[1] = unsigned(kernel.blockY);
  if ((kernel.grid == CudaGridRule::Explicit) != (grid != nullptr))
    throw Error(fmt::format("kernel {} (grid rule {}) {}", kernel.name,
                            cudaGridRuleName(kernel.grid),
                            grid ? "takes no explicit grid" : "needs an explicit grid"));
  switch (kernel.grid) {
  case CudaGridRule::Explicit: {
    const int64_t limits[3] = {(int64_t(1) << 31) - 1, 65535, 65535};
    for (int d = 0; d < 3; ++d) {
      if ((*grid)[d] < 0 || (*grid)[d] > limits[d])
        throw Error(fmt::format("kernel {}: grid[{}] = {} is outside [0, {}]", kernel.name, d,
                                (*grid)[d], limits[d]));
      shape.grid[d] = unsigned((*grid)[d]);
    }
    break;
  }
  default: {
    const bool columns = kernel.grid == CudaGridRule::Columns;
    shape.grid[0] = unsigned(cudaRuleGridX(kernel.grid, kernel.blockX, kernel.blockY,
                                           nthInteger(kernel, args, 0),
                                           columns ? nthInteger(kernel, args, 1) : 0));
    break;
  }
  }
  return shape;
}

KernelSet::KernelSet(std::shared_ptr<Device> device, const CudaSection &section)
    : device_(std::move(device)), section_(section) {
  const driver::Api &api = driver::require();
  const bool useCubin = section_.arch == device_->arch();
  loadedFrom_ = useCubin ? "cubin" : "ptx";
  for (const CudaKernel &kernel : section_.kernels) {
    const std::string step = fmt::format("loading kernel {} ({} for {}, device {})", kernel.name,
                                         loadedFrom_, section_.arch, device_->arch());
    CUmodule module = nullptr;
    char log[8192] = {};
    CUjit_option options[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
    void *values[] = {log, reinterpret_cast<void *>(uintptr_t(sizeof log - 1))};
    std::string ptx; // NUL-terminated copy for the JIT
    const void *image = kernel.cubin.data();
    if (!useCubin) {
      ptx = kernel.ptx;
      image = ptx.c_str();
    }
    CUresult result = api.moduleLoadDataEx(&module, image, 2, options, values);
    if (result != CUDA_SUCCESS)
      throw Error(fmt::format("CUDA error in {}: cuModuleLoadDataEx failed: {}{}{}", step,
                              driver::describe(result), log[0] ? "\n" : "", log));
    modules_.push_back(module);
    CUfunction function = nullptr;
    driver::check(api.moduleGetFunction(&function, module, kernel.name.c_str()), step,
                  "cuModuleGetFunction(" + kernel.name + ")");
    if (kernel.dynamicShared > 0) {
      // Past 48 KiB a block's dynamic shared memory must be allowed per
      // function (the device's opt-in limit: 99 KiB on sm_86, 227 on sm_90).
      const int64_t limit = device_->sharedMemoryPerBlockOptin();
      if (kernel.dynamicShared > limit)
        throw Error(fmt::format("{}: the kernel needs {} bytes of shared memory a block; the "
                                "device gives at most {}",
                                step, kernel.dynamicShared, limit));
      driver::check(api.funcSetAttribute(function,
                                         CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                         int(kernel.dynamicShared)),
                    step, "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)");
    }
    functions_[kernel.name] = {&kernel, reinterpret_cast<void *>(function)};
  }
}

KernelSet::~KernelSet() {
  if (const driver::Api *api = driver::api())
    for (void *module : modules_)
      api->moduleUnload(CUmodule(module));
}

void KernelSet::launch(const std::string &name, const std::vector<KernelArg> &args,
                       const std::string &step, const std::array<int64_t, 3> *grid,
                       void *stream) const {
  auto it = functions_.find(name);
  if (it == functions_.end())
    throw Error(fmt::format("{}: the package has no kernel {}", step, name));
  const CudaKernel &kernel = *it->second.first;
  LaunchShape shape;
  try {
    shape = launchShapeFor(kernel, args, grid);
  } catch (const Error &error) {
    throw Error(fmt::format("{}: {}", step, error.what()));
  }
  // A grid of 0 blocks (a grid rule's size of 0, an explicit grid with a 0)
  // is empty work, and not a valid launch: skip it. Nothing else is skipped;
  // any other argument, 0 included, is the kernel's to read.
  if (shape.empty())
    return;
  std::vector<CUdeviceptr> pointers(args.size());
  std::vector<void *> params(args.size());
  for (size_t i = 0; i < args.size(); ++i) {
    switch (args[i].kind) {
    case CudaParamKind::Ptr:
      pointers[i] = CUdeviceptr(args[i].ptr);
      params[i] = &pointers[i];
      break;
    case CudaParamKind::I64:
      params[i] = const_cast<int64_t *>(&args[i].i64);
      break;
    case CudaParamKind::F32:
      params[i] = const_cast<float *>(&args[i].f32);
      break;
    }
  }
  CUresult result = driver::require().launchKernel(
      CUfunction(it->second.second), shape.grid[0], shape.grid[1], shape.grid[2], shape.block[0],
      shape.block[1], shape.block[2], unsigned(kernel.dynamicShared), CUstream(stream),
      params.data(), nullptr);
  driver::check(result, step,
                fmt::format("cuLaunchKernel({}, grid {}x{}x{}, block {}x{})", name, shape.grid[0],
                            shape.grid[1], shape.grid[2], shape.block[0], shape.block[1]));
}

} // namespace stringrt::cuda
