// stringrt_attention_bench: times the generated fused RoPE attention kernels
// (compiler/lib/CudaGen/AttentionKernels.cpp, f32 FMA; AttentionMmaKernels.cpp,
// bf16 tensor cores) alone on the GPU, forward and forward + backward,
// launched as the op lowerings launch them, and prints one line of TFLOP/s
// for tests/bench/gpu_attention.py to set beside PyTorch's
// scaled_dot_product_attention plus a separate RoPE.
//
//   stringrt_attention_bench KERNELS.pkg BATCH TOKENS HEADS HEAD_DIM [ITERS [fp32|bf16]]
//
// KERNELS.pkg: tests/cuda/kernels.pe compiled with --target=cuda
// --gpu-all-kernels --gpu-precision=bf16 (scripts/gpu_packages.sh writes
// gpu/kernels.pkg), which has the kernels of both precisions.
// FLOPs are counted as FlashAttention does: forward 4 B H T^2 Dh (the two
// products), backward 2.5 times the forward. Exit 3 without a GPU.
#include "stringrt/Error.h"
#include "stringrt/Package.h"
#include "stringrt/cuda/CudaBackend.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

using namespace stringrt;
using namespace stringrt::cuda;

namespace {

struct Buffers {
  Arena &arena;
  size_t next = 0;
  uint64_t put(const std::vector<float> &values) {
    const size_t bytes = std::max<size_t>(values.size() * sizeof(float), 4);
    const size_t offset = next;
    next += (bytes + 255) / 256 * 256;
    arena.uploadVector(offset, values);
    return arena.at(offset, bytes);
  }
};

std::vector<float> randomValues(size_t n, std::mt19937 &rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float &x : v)
    x = normal(rng);
  return v;
}

// cos/sin pairs [T, D/2, 2] of a 1D RoPE (the table layout of pe.rope_table).
std::vector<float> ropeTable(int64_t T, int64_t D) {
  std::vector<float> t(static_cast<size_t>(T * D));
  for (int64_t i = 0; i < T; ++i)
    for (int64_t p = 0; p < D / 2; ++p) {
      const double angle = double(i) * std::pow(100.0, -2.0 * double(p) / double(D));
      t[size_t((i * (D / 2) + p) * 2)] = float(std::cos(angle));
      t[size_t((i * (D / 2) + p) * 2 + 1)] = float(std::sin(angle));
    }
  return t;
}

} // namespace

int main(int argc, char **argv) {
  if (argc < 6) {
    std::fprintf(stderr, "usage: %s KERNELS.pkg BATCH TOKENS HEADS HEAD_DIM [ITERS [fp32|bf16]]\n",
                 argv[0]);
    return 2;
  }
  const int64_t B = std::atoll(argv[2]), T = std::atoll(argv[3]), H = std::atoll(argv[4]),
                Dh = std::atoll(argv[5]);
  const int iters = argc > 6 ? std::atoi(argv[6]) : 50;
  const std::string precision = argc > 7 ? argv[7] : "fp32";
  const bool bf16 = precision == "bf16";
  if (precision != "fp32" && !bf16) {
    std::fprintf(stderr, "bad precision '%s': fp32 or bf16\n", precision.c_str());
    return 2;
  }
  if (B < 1 || T < 1 || H < 1 || (Dh != 16 && Dh != 32 && Dh != 64) || iters < 1) {
    std::fprintf(stderr, "bad shape: B, T, H >= 1 and HEAD_DIM 16, 32 or 64\n");
    return 2;
  }
  const std::string why = unavailableReason();
  if (!why.empty()) {
    std::fprintf(stderr, "no CUDA device: %s\n", why.c_str());
    return 3;
  }
  try {
    Package package = Package::load(argv[1]);
    if (!package.cuda())
      throw Error(std::string(argv[1]) + ": not a package of target cuda");
    std::shared_ptr<Device> device = Device::open();
    KernelSet kernels(device, *package.cuda());
    const int64_t D = H * Dh, n = B * T * D;
    Arena arena(device, size_t(n * 4 * 9 + 2 * B * H * T * 4 + T * D * 4 + (1 << 20)));
    Buffers buffers{arena};
    std::mt19937 rng(7);
    const uint64_t q = buffers.put(randomValues(size_t(n), rng)),
                   k = buffers.put(randomValues(size_t(n), rng)),
                   v = buffers.put(randomValues(size_t(n), rng)),
                   dy = buffers.put(randomValues(size_t(n), rng)),
                   table = buffers.put(ropeTable(T, D));
    const std::vector<float> zeros(size_t(n), 0.0f);
    const uint64_t y = buffers.put(zeros), dq = buffers.put(zeros), dk = buffers.put(zeros),
                   dv = buffers.put(zeros),
                   lse = buffers.put(std::vector<float>(size_t(B * H * T), 0.0f)),
                   delta = buffers.put(std::vector<float>(size_t(B * H * T), 0.0f));

    using KA = KernelArg;
    // Rows per block: the f32 kernels' (AttentionKernels.cpp), or 4 warps of
    // 16 for the tensor-core kernels.
    const int64_t rows = bf16 ? 64 : Dh > 32 ? 32 : 64;
    const std::array<int64_t, 3> grid = {B * H, (T + rows - 1) / rows, 1};
    const std::vector<KA> inputs = {KA::pointer(q), KA::pointer(k), KA::pointer(v),
                                    KA::pointer(table)};
    // No mask: every query sees the T - 1 keys after its own (the lookahead).
    const std::vector<KA> sizes = {KA::integer(T), KA::integer(D), KA::integer(H),
                                   KA::integer(T - 1),
                                   KA::real(float(1.0 / std::sqrt(double(Dh))))};
    const std::string family = bf16 ? "pe_rope_attention_mma" : "pe_rope_attention";
    const std::string suffix = "_d" + std::to_string(Dh);
    if (!package.cuda()->find(family + suffix))
      throw Error(std::string(argv[1]) + " has no kernel " + family + suffix +
                  (bf16 ? " (compile kernels.pe with --gpu-precision=bf16)" : ""));
    auto call = [&](const std::string &part, std::vector<KA> front, std::vector<KA> middle) {
      std::vector<KA> args = std::move(front);
      args.insert(args.end(), inputs.begin(), inputs.end());
      args.insert(args.end(), middle.begin(), middle.end());
      args.insert(args.end(), sizes.begin(), sizes.end());
      kernels.launch(family + part + suffix, args, "attention bench", &grid);
    };
    // The forward writes y and lse; the backward (delta = dy . y, then dK/dV
    // and dQ) reads them, as the step program runs them.
    auto forward = [&] { call("", {KA::pointer(y), KA::pointer(lse)}, {}); };
    const std::string deltaKernel = bf16 ? "pe_attention_mma_grad_delta" : "pe_attention_grad_delta";
    const std::vector<KA> saved = {KA::pointer(dy), KA::pointer(lse), KA::pointer(delta)};
    auto backward = [&] {
      kernels.launch(deltaKernel,
                     {KA::pointer(delta), KA::pointer(y), KA::pointer(dy), KA::integer(B * H * T),
                      KA::integer(T), KA::integer(D), KA::integer(H)},
                     "attention bench", nullptr);
      call("_grad_dkdv", {KA::pointer(dk), KA::pointer(dv)}, saved);
      call("_grad_dq", {KA::pointer(dq)}, saved);
    };
    auto seconds = [&](bool withBackward) {
      for (int i = 0; i < 3; ++i) { // warm-up
        forward();
        if (withBackward)
          backward();
      }
      device->synchronize("attention bench warm-up");
      const auto start = std::chrono::steady_clock::now();
      for (int i = 0; i < iters; ++i) {
        forward();
        if (withBackward)
          backward();
      }
      device->synchronize("attention bench");
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() /
             iters;
    };
    const double fwdFlops = 4.0 * double(B * H) * double(T) * double(T) * double(Dh);
    const double fwd = seconds(false), both = seconds(true);
    std::printf("stringc rope_attention %s B=%lld T=%lld H=%lld Dh=%lld: forward %.4f ms %.2f "
                "TFLOP/s, forward+backward %.4f ms %.2f TFLOP/s (%s)\n",
                precision.c_str(), static_cast<long long>(B), static_cast<long long>(T),
                static_cast<long long>(H),
                static_cast<long long>(Dh), fwd * 1e3, fwdFlops / fwd / 1e12, both * 1e3,
                3.5 * fwdFlops / both / 1e12, device->name().c_str());
    return 0;
  } catch (const std::exception &e) {
    std::fprintf(stderr, "stringrt_attention_bench: error: %s\n", e.what());
    return 1;
  }
}
