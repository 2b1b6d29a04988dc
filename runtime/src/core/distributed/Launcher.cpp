// launcherRanks() (stringrt/Distributed.h): what an MPI launcher leaves in
// its processes' environment. Read without MPI, so that a runtime built
// without it can say so rather than train N copies of one run.
#include "stringrt/Distributed.h"

#include <cstdlib>
#include <string>

namespace stringrt {

std::optional<int> launcherRanks() {
  // Open MPI's mpirun; MPICH's and Intel MPI's hydra (PMI).
  for (const char *name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"})
    if (const char *value = std::getenv(name)) {
      char *end = nullptr;
      const long size = std::strtol(value, &end, 10);
      if (end != value && *end == '\0' && size >= 1 && size <= (1 << 24))
        return static_cast<int>(size);
      return 0;
    }
  // A PMIx launcher (srun --mpi=pmix, prterun): the size comes from MPI.
  if (std::getenv("PMIX_RANK"))
    return 0;
  return std::nullopt;
}

} // namespace stringrt
