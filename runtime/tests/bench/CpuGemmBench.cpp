// stringrt_cpu_gemm_bench: times the runtime's CPU GEMM (cpu::gemm, the
// product behind pe.linear, pe.linear_grad_input and pe.linear_grad_weight)
// on one shape, with its operands in cache ("warm": the same product again)
// and out of it ("cold": a 64 MiB buffer walked between rounds, as a weight
// gradient finds the activation saved by the forward pass), and prints the
// best of the rounds in milliseconds for tests/bench/cpu_gemm.py to set
// beside PyTorch's matmul on the same shape.
//
//   stringrt_cpu_gemm_bench OP ROWS IN OUT THREADS ROUNDS
//
// OP is one of a linear layer's three products, x [ROWS, IN], w [IN, OUT]:
//   forward      y [ROWS, OUT] = x w
//   grad_input   dx [ROWS, IN] = dy w^T
//   grad_weight  dw [IN, OUT]  = x^T dy
// and a dense layer with a bias b [OUT] feeding a residual add, r [ROWS, OUT]:
//   linear_add       y = r + (x w + b) as two kernels: cpu::linear, cpu::add
//   linear_residual  the same fused (cpu::linearResidual, pe-fuse-residual)
// and an input gradient added to a prior sum p [ROWS, IN]:
//   grad_input_add   dx = p + dy w^T as cpu::linearGradInput, cpu::add
//   grad_input_acc   the same fused (cpu::linearGradInputAcc)
// Output: two lines, "warm MS" and "cold MS".
#include "Gemm.h"

#include "stringrt/cpu/ThreadPool.h"
#include "stringrt/ops/FusedOps.h"
#include "stringrt/ops/LayerOps.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <vector>

using namespace stringrt::cpu;

namespace {

int usage(const char *why) {
  std::fprintf(stderr,
               "%s\nusage: stringrt_cpu_gemm_bench forward|grad_input|grad_weight|linear_add|linear_residual|"
               "grad_input_add|grad_input_acc ROWS IN OUT "
               "THREADS ROUNDS (positive integers; ROWS x max(IN, OUT) and IN x OUT at most 2^28, "
               "ROUNDS at most 10000)\n",
               why);
  return 2;
}

bool positive(const char *text, int64_t &value) {
  char *end = nullptr;
  const long long parsed = std::strtoll(text, &end, 10);
  if (end == text || *end != '\0' || parsed <= 0)
    return false;
  value = parsed;
  return true;
}

std::vector<float> randomValues(int64_t count, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(count));
  for (float &x : v)
    x = dist(rng);
  return v;
}

// Best of `rounds` timings of run(), each after prepare().
double bestMs(int64_t rounds, const std::function<void()> &prepare,
              const std::function<void()> &run) {
  double best = 1e30;
  for (int64_t r = 0; r < rounds; ++r) {
    prepare();
    const auto start = std::chrono::steady_clock::now();
    run();
    const std::chrono::duration<double, std::milli> took =
        std::chrono::steady_clock::now() - start;
    best = std::min(best, took.count());
  }
  return best;
}

} // namespace

int main(int argc, char **argv) {
  if (argc != 7)
    return usage("expected 6 arguments");
  const std::string op = argv[1];
  int64_t rows, in, out, threads, rounds;
  if (!positive(argv[2], rows) || !positive(argv[3], in) || !positive(argv[4], out) ||
      !positive(argv[5], threads) || !positive(argv[6], rounds))
    return usage("ROWS, IN, OUT, THREADS and ROUNDS must be positive integers");
  // Divisions, not products: absurd sizes must not overflow int64.
  constexpr int64_t kMaxFloats = int64_t(1) << 28;
  if (rows > kMaxFloats / std::max(in, out) || in > kMaxFloats / out)
    return usage("the operands would exceed 2^28 floats");
  if (rounds > 10000)
    return usage("ROUNDS must be at most 10000");
  if (threads > maxThreads())
    return usage(tooManyThreads(threads).c_str());

  std::function<void()> product;
  const std::vector<float> x = randomValues(rows * in, 1), w = randomValues(in * out, 2),
                           dy = randomValues(rows * out, 3);
  std::vector<float> result;
  // The dense layer with its bias and residual (linear_add, linear_residual).
  const std::vector<float> bias = randomValues(out, 4), residual = randomValues(rows * out, 5);
  std::vector<float> linearResult;
  using stringrt::ref::TensorRef;
  auto view = [](const std::vector<float> &v, std::vector<int64_t> shape) {
    return TensorRef<const float>{v.data(), std::move(shape)};
  };
  if (op == "forward") {
    result.resize(static_cast<size_t>(rows * out));
    product = [&] {
      gemm(Trans::No, Trans::No, rows, out, in, 1.0f, x.data(), in, w.data(), out, 0.0f,
           result.data(), out);
    };
  } else if (op == "grad_input") {
    result.resize(static_cast<size_t>(rows * in));
    product = [&] {
      gemm(Trans::No, Trans::Yes, rows, in, out, 1.0f, dy.data(), out, w.data(), out, 0.0f,
           result.data(), in);
    };
  } else if (op == "grad_weight") {
    result.resize(static_cast<size_t>(in * out));
    product = [&] {
      gemm(Trans::Yes, Trans::No, in, out, rows, 1.0f, x.data(), in, dy.data(), out, 0.0f,
           result.data(), out);
    };
  } else if (op == "linear_add" || op == "linear_residual") {
    result.resize(static_cast<size_t>(rows * out));
    linearResult.resize(result.size());
    const bool fused = op == "linear_residual";
    product = [&, fused] {
      TensorRef<const float> xs = view(x, {rows, in}), ws = view(w, {in, out}),
                             bs = view(bias, {out}), rs = view(residual, {rows, out});
      TensorRef<float> y{result.data(), {rows, out}}, l{linearResult.data(), {rows, out}};
      if (fused) {
        linearResidual(rs, xs, ws, bs, y);
      } else {
        linear(xs, ws, bs, l);
        add(rs, l, y);
      }
    };
  } else if (op == "grad_input_add" || op == "grad_input_acc") {
    result.resize(static_cast<size_t>(rows * in));
    linearResult.resize(result.size());
    const std::vector<float> prior = randomValues(rows * in, 6);
    const bool fused = op == "grad_input_acc";
    product = [&, prior, fused] {
      TensorRef<const float> dys = view(dy, {rows, out}), ws = view(w, {in, out}),
                             ps = view(prior, {rows, in});
      TensorRef<float> dx{result.data(), {rows, in}}, g{linearResult.data(), {rows, in}};
      if (fused) {
        linearGradInputAcc(ps, dys, ws, dx);
      } else {
        linearGradInput(dys, ws, g);
        add(ps, g, dx);
      }
    };
  } else {
    return usage(("unknown OP '" + op + "'").c_str());
  }

  setNumThreads(static_cast<int>(threads));
  product(); // the pool started, scratch allocated
  std::vector<float> flush(size_t(16) << 20, 1.0f); // 64 MiB, past the last-level cache
  float sink = 0.0f;
  const double warm = bestMs(rounds, [] {}, product);
  const double cold = bestMs(
      rounds,
      [&] {
        for (size_t i = 0; i < flush.size(); i += 16) // one float a cache line
          flush[i] += 1.0f;
        sink += flush[rows % flush.size()];
      },
      product);
  std::printf("warm %.4f\ncold %.4f\n", warm, cold);
  return sink == -1.0f ? 1 : 0; // keeps the flush from being optimised away
}
