// stringrt_rel_attention_bench: times the fast CPU attention with relative
// rotations (cpu::attention / cpu::attentionGrad with rel [T, T, Dh, Dh],
// RelativeAttention.cpp) alone on one shape, operands in cache, and prints
// the best of the rounds in milliseconds. vit_generators' shape is
// B 128, T 50, D 64, 4 heads (Dh 16).
//
//   stringrt_rel_attention_bench B T D HEADS THREADS ROUNDS [causal]
//
// Output: two lines, "forward MS" and "grad MS" (the gradient with drel).
#include "stringrt/cpu/FastKernels.h"
#include "stringrt/cpu/ThreadPool.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <vector>

using namespace stringrt;

namespace {

int usage(const char *why) {
  std::fprintf(stderr,
               "%s\nusage: stringrt_rel_attention_bench B T D HEADS THREADS ROUNDS [causal] "
               "(positive integers, HEADS dividing D; B T D and T T D^2/HEADS^2 at most 2^28, "
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

std::vector<float> randomValues(int64_t count, unsigned seed, float scale) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<float> v(static_cast<size_t>(count));
  for (float &x : v)
    x = dist(rng);
  return v;
}

double bestMs(int64_t rounds, const std::function<void()> &run) {
  double best = 1e30;
  for (int64_t r = 0; r < rounds; ++r) {
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
  if (argc != 7 && argc != 8)
    return usage("expected six or seven arguments");
  int64_t B, T, D, heads, threads, rounds;
  if (!positive(argv[1], B) || !positive(argv[2], T) || !positive(argv[3], D) ||
      !positive(argv[4], heads) || !positive(argv[5], threads) || !positive(argv[6], rounds))
    return usage("B T D HEADS THREADS ROUNDS must be positive integers");
  const bool causal = argc == 8 && std::string(argv[7]) == "causal";
  if (argc == 8 && !causal)
    return usage("the seventh argument, when given, is 'causal'");
  const int64_t limit = int64_t(1) << 28;
  if (D % heads != 0 || B > limit / T || B * T > limit / D || rounds > 10000)
    return usage("bad sizes");
  const int64_t Dh = D / heads;
  if (T > limit / T || T * T > limit / (Dh * Dh))
    return usage("rel would exceed 2^28 floats");
  cpu::setNumThreads(static_cast<int>(threads));

  const std::vector<int64_t> shape{B, T, D}, relShape{T, T, Dh, Dh};
  const int64_t n = B * T * D, nRel = T * T * Dh * Dh;
  const std::vector<float> q = randomValues(n, 1, 1.0f), k = randomValues(n, 2, 1.0f),
                           v = randomValues(n, 3, 1.0f), dy = randomValues(n, 4, 1.0f),
                           rel = randomValues(nRel, 5, 0.3f);
  std::vector<float> y(n), dq(n), dk(n), dv(n), drel(nRel);
  const double scale = 1.0 / std::sqrt(double(Dh));
  const auto mask = causal ? ref::AttentionMask::Causal : ref::AttentionMask::None;
  const ref::TensorRef<const float> qr{q.data(), shape}, kr{k.data(), shape},
      vr{v.data(), shape}, dyr{dy.data(), shape}, relr{rel.data(), relShape};

  const double forward = bestMs(rounds, [&] {
    cpu::attention(qr, kr, vr, relr, heads, scale, mask, 0, {y.data(), shape});
  });
  const double grad = bestMs(rounds, [&] {
    cpu::attentionGrad(qr, kr, vr, dyr, relr, heads, scale, mask, 0, {dq.data(), shape},
                       {dk.data(), shape}, {dv.data(), shape},
                       ref::TensorRef<float>{drel.data(), relShape});
  });
  std::printf("forward %.3f\ngrad %.3f\n", forward, grad);
  return 0;
}
