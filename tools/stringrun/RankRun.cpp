#include "RankRun.h"

#include "stringrt/Error.h"
#include "stringrt/cpu/ThreadPool.h"

#ifdef STRINGRUN_HAVE_MPI
#include "stringrt/MpiCommunicator.h"
#endif

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <new>
#include <thread>

namespace stringrun {

void refuseRanks(const std::string &command, bool cuda) {
  const std::optional<int> launched = stringrt::launcherRanks();
  if (launched && *launched != 1 && command != "train")
    throw stringrt::Error(fmt::format(
        "started by an MPI launcher on {} ranks: only 'stringrun train' (on the CPU or with "
        "--device cuda) runs on ranks (docs/distributed.md); run '{}'{} as one process",
        *launched == 0 ? std::string("several") : std::to_string(*launched), command,
        cuda ? " --device cuda" : ""));
}

std::unique_ptr<stringrt::Communicator> joinRanks(double timeoutSeconds) {
  const std::optional<int> launched = stringrt::launcherRanks();
  if (!launched)
    return nullptr;
#ifdef STRINGRUN_HAVE_MPI
  return stringrt::joinMpi(timeoutSeconds);
#else
  (void)timeoutSeconds;
  if (*launched == 1)
    return nullptr; // alone: the one-process run
  throw stringrt::Error("started by an MPI launcher, but this stringrun was built without "
                        "MPI (install libopenmpi-dev and reconfigure; docs/distributed.md)");
#endif
}

void shareCores(bool threadsGiven) {
  if (threadsGiven || std::getenv("STRINGRT_THREADS"))
    return;
  for (const char *name : {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS"})
    if (const char *value = std::getenv(name)) {
      const long local = std::strtol(value, nullptr, 10);
      const long cores = static_cast<long>(std::thread::hardware_concurrency());
      if (local > 1 && cores > 0)
        stringrt::cpu::setNumThreads(static_cast<int>(std::max(1L, cores / local)));
      return;
    }
}

int onRank(stringrt::Communicator &ranks, const std::function<int()> &body,
           const std::function<void()> &beforeError) {
  std::string message;
  try {
    return body();
  } catch (const std::bad_alloc &) {
    message = "out of memory: use a smaller --batch (or a machine with more memory)";
  } catch (const std::exception &e) {
    message = e.what();
  }
  beforeError();
  std::fflush(stdout);
  std::fprintf(stderr, "stringrun: error: rank %d of %d: %s\n", ranks.rank(), ranks.size(),
               message.c_str());
  ranks.abort(1);
  return 1; // (abort does not return)
}

} // namespace stringrun
