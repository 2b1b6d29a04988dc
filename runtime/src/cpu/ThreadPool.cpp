// The fixed worker pool behind stringrt::cpu::parallelFor (ThreadPool.h).
//
// One job at a time: the caller publishes a Job (a task and a chunk count),
// wakes the workers, and everyone - the caller included - claims chunk
// indices from the job's atomic counter until none are left. The job lives
// in a shared_ptr so that a worker waking late, after the caller has moved
// on, only touches an exhausted counter of its own copy and never the next
// job's state.
//
// Idle workers spin for a short while (kSpin) before they sleep on the
// condition variable, and so does the caller waiting for the last chunk: a
// training step issues a few hundred jobs of 0.05-1 ms each, and a worker
// woken through the kernel (tens of microseconds on a VM) arrived after the
// caller had claimed its chunk too, so the job ran on one core.
#include "stringrt/cpu/ThreadPool.h"

#include "Gemm.h"

#include "stringrt/Error.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace stringrt::cpu {
namespace {

// True on pool workers, and on a caller while it runs a job: a parallelFor
// issued there runs serially instead of waiting on the (busy) pool.
thread_local bool tInsideJob = false;

// How long a thread polls for a job (or a job's end) before it sleeps.
constexpr std::chrono::microseconds kSpin{100};

void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#else
  std::this_thread::yield();
#endif
}

// Polls ready() until it holds or kSpin has passed; whether it held.
template <typename Ready> bool spinUntil(Ready ready) {
  const auto deadline = std::chrono::steady_clock::now() + kSpin;
  for (int polls = 0;; ++polls) {
    if (ready())
      return true;
    cpuRelax();
    if ((polls & 15) == 15 && std::chrono::steady_clock::now() > deadline)
      return false;
  }
}

struct Job {
  const std::function<void(int64_t)> *task = nullptr;
  int64_t chunks = 0;
  std::atomic<int64_t> next{0}; // the next unclaimed chunk
  std::atomic<int64_t> done{0}; // chunks finished
  std::mutex mutex;             // guards error; pairs with finished
  std::condition_variable finished;
  std::exception_ptr error;

  // Claims and runs chunks until none are left.
  void work() {
    for (int64_t c = next.fetch_add(1); c < chunks; c = next.fetch_add(1)) {
      try {
        (*task)(c);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mutex);
        if (!error)
          error = std::current_exception();
      }
      if (done.fetch_add(1) + 1 == chunks) {
        std::lock_guard<std::mutex> lock(mutex);
        finished.notify_all();
      }
    }
  }
};

class Pool {
public:
  explicit Pool(int threads) { startOrFail(threads); }
  ~Pool() { stop(); }
  Pool(const Pool &) = delete;
  Pool &operator=(const Pool &) = delete;

  int size() const { return size_.load(); }

  void resize(int threads) {
    std::lock_guard<std::mutex> submit(submitMutex_);
    stop();
    startOrFail(threads);
  }

  // Calls task(c) for every c in [0, chunks), spread over the pool.
  void run(int64_t chunks, const std::function<void(int64_t)> &task) {
    std::lock_guard<std::mutex> submit(submitMutex_);
    auto job = std::make_shared<Job>();
    job->task = &task;
    job->chunks = chunks;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      job_ = job;
      generation_.fetch_add(1);
    }
    wake_.notify_all();

    tInsideJob = true;
    job->work();
    tInsideJob = false;
    if (!spinUntil([&] { return job->done.load() == job->chunks; })) {
      std::unique_lock<std::mutex> lock(job->mutex);
      job->finished.wait(lock, [&] { return job->done.load() == job->chunks; });
    }
    {
      // Drop the pool's reference so the job dies with its last worker.
      std::lock_guard<std::mutex> lock(mutex_);
      job_.reset();
    }
    if (job->error)
      std::rethrow_exception(job->error);
  }

private:
  // start(), or, when the system cannot start the threads, a pool of one
  // thread and an Error saying so.
  void startOrFail(int threads) {
    try {
      start(threads);
    } catch (const std::system_error &e) {
      const size_t started = workers_.size() + 1;
      stop();
      start(1);
      throw Error("cannot start " + std::to_string(threads) + " threads (the system refused " +
                  "after " + std::to_string(started) + ": " + e.what() +
                  "); use fewer threads (--threads, STRINGRT_THREADS)");
    }
  }

  void start(int threads) {
    size_ = threads;
    stopping_ = false;
    // Counts the pool's threads together with BLAS's: both get `threads`.
    setBlasThreads(threads);
    // A worker counts jobs from the generation current now, not from when
    // its thread gets to run: a job published in between is not missed.
    for (int i = 1; i < threads; ++i)
      workers_.emplace_back([this, seen = generation_.load()] { workerLoop(seen); });
  }

  void stop() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    for (std::thread &t : workers_)
      t.join();
    workers_.clear();
  }

  void workerLoop(uint64_t seen) {
    tInsideJob = true;
    for (;;) {
      std::shared_ptr<Job> job;
      spinUntil([&] { return stopping_.load() || generation_.load() != seen; });
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [&] { return stopping_ || generation_ != seen; });
        if (stopping_)
          return;
        seen = generation_;
        job = job_;
      }
      if (job)
        job->work();
    }
  }

  std::mutex submitMutex_; // one job (or resize) at a time
  std::mutex mutex_; // guards job_, and the changes of generation_ and stopping_
  std::condition_variable wake_;
  std::shared_ptr<Job> job_;
  std::atomic<uint64_t> generation_{0}; // atomic: the spinning workers read it unlocked
  std::atomic<bool> stopping_{false};
  std::atomic<int> size_{1};
  std::vector<std::thread> workers_;
};

int hardwareThreads() {
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

// STRINGRT_THREADS when set, else the hardware's thread count (at least 1).
int defaultThreadCount() {
  if (const char *env = std::getenv("STRINGRT_THREADS")) {
    char *end = nullptr;
    const long n = std::strtol(env, &end, 10);
    if (end == env || *end != '\0' || n < 1 || n > maxThreads())
      throw Error(std::string("STRINGRT_THREADS must be an integer in [1, ") +
                  std::to_string(maxThreads()) + "], got '" + env + "'");
    return static_cast<int>(n);
  }
  return hardwareThreads();
}

Pool &globalPool() {
  static Pool pool(defaultThreadCount());
  return pool;
}

} // namespace

int maxThreads() { return std::min(1024, std::max(16, 4 * hardwareThreads())); }

std::string tooManyThreads(int64_t asked) {
  return std::to_string(asked) + " threads asked for; this machine has " +
         std::to_string(hardwareThreads()) + " hardware threads and allows at most " +
         std::to_string(maxThreads()) + " (4 per hardware thread, at least 16, at most 1024)";
}

int numThreads() { return globalPool().size(); }

void setNumThreads(int n) {
  if (n < 1)
    throw Error("setNumThreads: the thread count must be >= 1, got " + std::to_string(n));
  if (n > maxThreads())
    throw Error("setNumThreads: " + tooManyThreads(n));
  if (tInsideJob)
    throw Error("setNumThreads: cannot resize the pool from inside parallelFor");
  globalPool().resize(n);
}

void parallelFor(int64_t begin, int64_t end, int64_t grain,
                 const std::function<void(int64_t, int64_t)> &fn) {
  if (end <= begin)
    return;
  const int64_t n = end - begin;
  grain = std::max<int64_t>(grain, 1);
  Pool &pool = globalPool();
  const int64_t chunks = std::min<int64_t>(pool.size(), n / grain);
  if (chunks <= 1 || tInsideJob) {
    fn(begin, end);
    return;
  }
  // Chunk c is [begin + n c / chunks, begin + n (c + 1) / chunks): sizes
  // differ by at most one, and all are >= n / chunks >= grain.
  const std::function<void(int64_t)> task = [&](int64_t c) {
    fn(begin + n * c / chunks, begin + n * (c + 1) / chunks);
  };
  pool.run(chunks, task);
}

void parallelCopy(void *to, const void *from, size_t bytes) {
  constexpr int64_t kBlock = int64_t(1) << 20;
  const auto blocks = static_cast<int64_t>((bytes + kBlock - 1) / kBlock);
  parallelFor(0, blocks, 1, [&](int64_t b, int64_t e) {
    const auto first = static_cast<size_t>(b * kBlock);
    const size_t last = std::min(bytes, static_cast<size_t>(e * kBlock));
    std::memcpy(static_cast<char *>(to) + first, static_cast<const char *>(from) + first,
                last - first);
  });
}

} // namespace stringrt::cpu
