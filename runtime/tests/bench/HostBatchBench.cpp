// stringrt_host_batch_bench: times the host's share of a training step's
// data, the part a device waits for when it outruns the host: gathering a
// batch of uint8 images into floats (DataSet::batch, fresh and in a recycled
// batch's buffers, as the trainer does), augmenting it (augmentImages: crop,
// flip, erase) and copying it into a staging buffer (cpu::parallelCopy, as
// BatchStaging does), on the CPU pool; and drawing the augmentation's
// parameters alone (drawAugmentation), the host's whole share of it when a
// device augments in its kernel. Prints one line per measure for
// tests/bench/host_batch.py to set beside PyTorch's gather.
//
//   stringrt_host_batch_bench BATCH CHANNELS ROWS COLS THREADS [ROUNDS]
//
// Each figure is the best of ROUNDS (default 5), in milliseconds:
//   gather_fresh MS / gather_recycled MS / augment MS / stage_copy MS / draw MS
#include "stringrt/Augment.h"
#include "stringrt/Data.h"
#include "stringrt/Error.h"
#include "stringrt/cpu/ThreadPool.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

using namespace stringrt;

namespace {

double bestOf(int rounds, const std::function<void()> &work) {
  double best = 1e300;
  for (int r = 0; r < rounds; ++r) {
    const auto start = std::chrono::steady_clock::now();
    work();
    const std::chrono::duration<double, std::milli> ms = std::chrono::steady_clock::now() - start;
    best = std::min(best, ms.count());
  }
  return best;
}

int64_t positive(const char *text, const char *what) {
  char *end = nullptr;
  const long long v = std::strtoll(text, &end, 10);
  if (!*text || *end || v < 1 || v > (1LL << 20))
    throw Error(std::string(what) + " must be an integer in [1, 2^20], got '" + text + "'");
  return v;
}

} // namespace

int main(int argc, char **argv) {
  try {
    if (argc < 6 || argc > 7) {
      std::fprintf(stderr, "usage: stringrt_host_batch_bench BATCH CHANNELS ROWS COLS THREADS [ROUNDS]\n");
      return 2;
    }
    const int64_t B = positive(argv[1], "BATCH"), C = positive(argv[2], "CHANNELS"),
                  H = positive(argv[3], "ROWS"), W = positive(argv[4], "COLS");
    const int threads = static_cast<int>(positive(argv[5], "THREADS"));
    const int rounds = argc == 7 ? static_cast<int>(positive(argv[6], "ROUNDS")) : 5;
    cpu::setNumThreads(threads);

    // Two batches' worth of images, so the gather reads memory, not cache.
    const int64_t count = 2 * B, image = C * H * W;
    ImageSplit train;
    train.u8.resize(size_t(count * image));
    for (size_t i = 0; i < train.u8.size(); ++i)
      train.u8[i] = static_cast<uint8_t>((i * 2654435761u) >> 24);
    train.labels.assign(size_t(count), 1);
    ImageSplit test = train;
    DataSet data = DataSet::images(C, H, W, std::move(train), std::move(test));
    std::vector<int64_t> indices(static_cast<size_t>(B));
    for (int64_t i = 0; i < B; ++i)
      indices[size_t(i)] = (i * 7919) % count;

    AugmentPolicy policy;
    policy.cropPadding = 4;
    policy.flipProbability = 0.5;
    policy.eraseProbability = 0.25;

    Batch batch, spare;
    const double fresh = bestOf(rounds, [&] {
      batch = Batch{};
      batch = data.batch(Split::Train, indices.data(), indices.size());
    });
    const double recycled = bestOf(rounds, [&] {
      spare = data.batch(Split::Train, indices.data(), indices.size(), std::move(spare));
    });
    int64_t step = 0;
    const double augment = bestOf(rounds, [&] {
      augmentBatchImages(policy, 1234, step++, spare);
    });
    std::vector<float> staging(spare.tensors[0].f32.size());
    const double copy = bestOf(rounds, [&] {
      cpu::parallelCopy(staging.data(), spare.tensors[0].f32.data(), staging.size() * sizeof(float));
    });
    const std::vector<int64_t> &shape = spare.tensors[0].shape;
    std::vector<int32_t> draws(size_t(shape[0] * kAugmentDrawWords));
    const double draw = bestOf(rounds, [&] {
      drawAugmentation(policy, 1234, step++, shape[0], shape[2], shape[3], draws.data());
    });
    std::printf("gather_fresh %.3f\ngather_recycled %.3f\naugment %.3f\nstage_copy %.3f\ndraw %.4f\n",
                fresh, recycled, augment, copy, draw);
    return 0;
  } catch (const std::exception &e) {
    std::fprintf(stderr, "stringrt_host_batch_bench: %s\n", e.what());
    return 1;
  }
}
