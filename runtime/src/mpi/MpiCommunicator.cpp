// joinMpi() (stringrt/MpiCommunicator.h). Errors are returned by MPI
// (MPI_ERRORS_RETURN), not fatal, so that they reach the caller as Error;
// the caller ends the run with abort(). Waits poll (MPI_Testsome, then a
// short sleep growing to 1 ms): the ranks of an oversubscribed machine do not
// spin against each other, and a rank whose message is overdue can be named.
#include "stringrt/MpiCommunicator.h"

#include "stringrt/Error.h"

#include <fmt/format.h>
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <thread>

namespace stringrt {

namespace {

std::string mpiError(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS)
    return fmt::format("MPI error {}", code);
  return std::string(text, static_cast<size_t>(length));
}

class MpiCommunicator : public Communicator {
public:
  explicit MpiCommunicator(double timeoutSeconds) : timeout_(timeoutSeconds) {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized && MPI_Init(nullptr, nullptr) != MPI_SUCCESS)
      throw Error("MPI_Init failed: cannot join the ranks of this run");
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
  }
  ~MpiCommunicator() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized)
      MPI_Finalize();
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  void exchange(const std::vector<Send> &send, const std::vector<Receive> &receive,
                const std::string &what) override {
    const size_t n = static_cast<size_t>(size_);
    if (send.size() != n || receive.size() != n)
      throw Error(fmt::format("{}: {} messages to send and {} to receive for {} ranks", what,
                              send.size(), receive.size(), n));
    // Receives first (indices [0, n - 1)), then sends.
    std::vector<MPI_Request> requests;
    std::vector<int> peer;
    requests.reserve(2 * n);
    auto check = [&](int code, const char *call, int other) {
      if (code != MPI_SUCCESS)
        throw Error(fmt::format("{} with rank {} failed during {}: {}", call, other, what,
                                mpiError(code)));
    };
    for (size_t r = 0; r < n; ++r) {
      if (static_cast<int>(r) == rank_ || receive[r].skip)
        continue;
      requests.emplace_back();
      peer.push_back(static_cast<int>(r));
      check(MPI_Irecv(receive[r].data, count(receive[r].bytes, what), MPI_BYTE,
                      static_cast<int>(r), kTag, MPI_COMM_WORLD, &requests.back()),
            "MPI_Irecv", static_cast<int>(r));
    }
    const size_t receives = requests.size();
    for (size_t k = 0; k < n; ++k) {
      if (static_cast<int>(k) == rank_ || send[k].skip)
        continue;
      requests.emplace_back();
      peer.push_back(static_cast<int>(k));
      check(MPI_Isend(send[k].data, count(send[k].bytes, what), MPI_BYTE, static_cast<int>(k),
                      kTag, MPI_COMM_WORLD, &requests.back()),
            "MPI_Isend", static_cast<int>(k));
    }
    wait(requests, peer, receives, what);
  }

  [[noreturn]] void abort(int code) override {
    std::fflush(stdout);
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, code);
    std::_Exit(code);
  }

private:
  static constexpr int kTag = 4500;

  int count(size_t bytes, const std::string &what) const {
    if (bytes > static_cast<size_t>(INT_MAX))
      throw Error(fmt::format("{}: a message of {} bytes is over MPI's 2 GiB count", what,
                              bytes));
    return static_cast<int>(bytes);
  }

  void wait(std::vector<MPI_Request> &requests, const std::vector<int> &peer, size_t receives,
            const std::string &what) {
    using Clock = std::chrono::steady_clock;
    const auto start = Clock::now();
    auto lastProgress = start;
    std::vector<int> done(requests.size());
    std::vector<MPI_Status> statuses(requests.size());
    size_t left = requests.size();
    int pause = 1; // microseconds
    while (left > 0) {
      int count = 0;
      const int code = MPI_Testsome(static_cast<int>(requests.size()), requests.data(), &count,
                                    done.data(), statuses.data());
      if (code != MPI_SUCCESS) {
        // Which request failed: the first with an error status.
        int other = -1;
        for (int i = 0; i < count; ++i)
          if (statuses[static_cast<size_t>(i)].MPI_ERROR != MPI_SUCCESS)
            other = peer[static_cast<size_t>(done[static_cast<size_t>(i)])];
        throw Error(fmt::format("the messages with rank {} failed during {}: {}", other, what,
                                mpiError(code)));
      }
      if (count == MPI_UNDEFINED)
        break;
      if (count > 0) {
        left -= static_cast<size_t>(count);
        lastProgress = Clock::now();
        pause = 1;
        continue;
      }
      const double idle = std::chrono::duration<double>(Clock::now() - lastProgress).count();
      if (idle > timeout_) {
        // The ranks this one waits for: those whose message has not come,
        // else those that have not taken this one's (a stopped rank takes
        // nothing, and the transport holds a large message until it does).
        auto pending = [&](size_t begin, size_t end) {
          std::vector<int> ranks;
          for (size_t i = begin; i < end; ++i)
            if (requests[i] != MPI_REQUEST_NULL)
              ranks.push_back(peer[i]);
          return ranks;
        };
        auto named = [](const std::vector<int> &ranks) {
          std::string text = ranks.size() == 1 ? "rank " : "ranks ";
          for (size_t i = 0; i < ranks.size(); ++i)
            text += (i ? ", " : "") + std::to_string(ranks[i]);
          return text;
        };
        const std::vector<int> silent = pending(0, receives);
        if (!silent.empty())
          throw Error(fmt::format("nothing from {} for {:g} s during {}: stopped, hung or "
                                  "dead (--rank-timeout)",
                                  named(silent), timeout_, what));
        throw Error(fmt::format("{} took nothing from this rank for {:g} s during {}: stopped, "
                                "hung or dead (--rank-timeout)",
                                named(pending(receives, requests.size())), timeout_, what));
      }
      std::this_thread::sleep_for(std::chrono::microseconds(pause));
      pause = std::min(pause * 2, 1000);
    }
  }

  double timeout_;
  int rank_ = 0, size_ = 1;
};

} // namespace

std::unique_ptr<Communicator> joinMpi(double timeoutSeconds) {
  return std::make_unique<MpiCommunicator>(timeoutSeconds);
}

} // namespace stringrt
