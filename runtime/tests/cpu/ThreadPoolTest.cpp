// The thread pool: every index visited exactly once, chunks respect the
// grain, nesting runs serially, exceptions reach the caller, resizing.
#include "stringrt/cpu/ThreadPool.h"

#include "CpuTestUtil.h"

#include "stringrt/Error.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

namespace {

using namespace stringrt;
using namespace stringrt::cpu;
using stringrt::cpu::testing::ScopedThreads;

TEST(ThreadPool, VisitsEveryIndexOnceInChunksOfAtLeastTheGrain) {
  for (int threads : {1, 2, 4, 7}) {
    ScopedThreads scoped(threads);
    EXPECT_EQ(numThreads(), threads);
    for (int64_t n : {0, 1, 5, 100, 1001})
      for (int64_t grain : {1, 3, 64, 5000}) {
        SCOPED_TRACE("threads " + std::to_string(threads) + " n " + std::to_string(n) +
                     " grain " + std::to_string(grain));
        const int64_t begin = 10;
        std::vector<std::atomic<int>> visits(static_cast<size_t>(n));
        std::atomic<int> chunks{0}, tooSmall{0};
        parallelFor(begin, begin + n, grain, [&](int64_t b, int64_t e) {
          ++chunks;
          if (e - b < grain && e - b != n)
            ++tooSmall;
          for (int64_t i = b; i < e; ++i)
            ++visits[static_cast<size_t>(i - begin)];
        });
        for (const auto &v : visits)
          ASSERT_EQ(v.load(), 1);
        EXPECT_EQ(tooSmall.load(), 0);
        EXPECT_LE(chunks.load(), threads);
      }
  }
}

TEST(ThreadPool, UsesSeveralThreadsForALargeRange) {
  ScopedThreads scoped(4);
  std::mutex mutex;
  std::vector<std::thread::id> ids;
  parallelFor(0, 4, 1, [&](int64_t, int64_t) {
    // Long enough that one thread cannot claim every chunk.
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    std::lock_guard<std::mutex> lock(mutex);
    ids.push_back(std::this_thread::get_id());
  });
  ASSERT_EQ(ids.size(), 4u);
  std::sort(ids.begin(), ids.end());
  EXPECT_GT(std::unique(ids.begin(), ids.end()) - ids.begin(), 1);
}

TEST(ThreadPool, NestedParallelForRunsSeriallyInsideAChunk) {
  ScopedThreads scoped(4);
  std::atomic<int64_t> total{0};
  parallelFor(0, 8, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      int innerChunks = 0;
      parallelFor(0, 100, 1, [&](int64_t ib, int64_t ie) {
        ++innerChunks; // not atomic: serial execution is what is tested
        total += ie - ib;
      });
      EXPECT_EQ(innerChunks, 1);
    }
  });
  EXPECT_EQ(total.load(), 800);
}

TEST(ThreadPool, ExceptionsReachTheCallerAndThePoolStaysUsable) {
  ScopedThreads scoped(4);
  EXPECT_THROW(parallelFor(0, 100, 1,
                           [&](int64_t b, int64_t) {
                             if (b > 0)
                               throw std::runtime_error("chunk failed");
                           }),
               std::runtime_error);
  std::atomic<int64_t> sum{0};
  parallelFor(0, 1000, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      sum += i;
  });
  EXPECT_EQ(sum.load(), 999 * 1000 / 2);
}

TEST(ThreadPool, ParallelCopyCopiesEveryByteOnAnyThreadCount) {
  const size_t sizes[] = {0, 1, 4096, (size_t(1) << 20) + 3, 5 * (size_t(1) << 20) + 7};
  for (int threads : {1, 3, 4}) {
    ScopedThreads scoped(threads);
    for (size_t bytes : sizes) {
      std::vector<unsigned char> from(bytes), to(bytes + 2, 0xAB);
      for (size_t i = 0; i < bytes; ++i)
        from[i] = static_cast<unsigned char>(i * 131 + i / 977);
      parallelCopy(to.data() + 1, from.data(), bytes);
      EXPECT_EQ(to.front(), 0xAB);
      EXPECT_EQ(to.back(), 0xAB); // nothing written past the end
      EXPECT_TRUE(std::equal(from.begin(), from.end(), to.begin() + 1))
          << bytes << " bytes on " << threads << " threads";
    }
  }
}

TEST(ThreadPool, RejectsANonPositiveThreadCount) {
  EXPECT_THROW(setNumThreads(0), Error);
  EXPECT_THROW(setNumThreads(-3), Error);
  EXPECT_GE(numThreads(), 1);
}

TEST(ThreadPool, ConcurrentCallersAreSerialisedCorrectly) {
  ScopedThreads scoped(3);
  std::atomic<int64_t> sum{0};
  std::vector<std::thread> callers;
  for (int c = 0; c < 4; ++c)
    callers.emplace_back([&] {
      for (int round = 0; round < 50; ++round)
        parallelFor(0, 64, 1, [&](int64_t b, int64_t e) { sum += e - b; });
    });
  for (std::thread &t : callers)
    t.join();
  EXPECT_EQ(sum.load(), 4 * 50 * 64);
}

} // namespace
