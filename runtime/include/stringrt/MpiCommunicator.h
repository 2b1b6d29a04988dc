// The ranks of an MPI run as a Communicator (stringrt/Distributed.h): built
// into the library stringrt_mpi where MPI is found at configure time
// (docs/distributed.md). Point-to-point messages only (MPI_Isend, MPI_Irecv),
// polled, so that a rank that sends nothing within the timeout is named in
// an Error rather than waited for forever.
#pragma once

#include "stringrt/Distributed.h"

#include <memory>

namespace stringrt {

// Initialises MPI and joins MPI_COMM_WORLD (call once per process, where
// launcherRanks() says a launcher started it). `timeoutSeconds` bounds
// Communicator::exchange's waits. MPI is finalised when the
// communicator is destroyed.
std::unique_ptr<Communicator> joinMpi(double timeoutSeconds);

} // namespace stringrt
