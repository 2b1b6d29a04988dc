// stringrun train under an MPI launcher (docs/distributed.md): the ranks of
// the run, and how an error on one rank ends all of them.
#pragma once

#include "stringrt/Distributed.h"

#include <functional>
#include <memory>
#include <string>

namespace stringrun {

// Throws Error where an MPI launcher started this process on more than one
// rank for anything but train (`command`; `cuda`: --device cuda, named in
// the message): only that runs on ranks, on CPUs or GPUs.
void refuseRanks(const std::string &command, bool cuda);

// The ranks this CPU training run takes, where an MPI launcher started it
// (stringrt::launcherRanks()); nullptr otherwise (one process: nothing
// changes). `timeoutSeconds` bounds the waits for another rank's gradients.
// Throws Error where a launcher started more than one rank and this
// stringrun has no MPI.
std::unique_ptr<stringrt::Communicator> joinRanks(double timeoutSeconds);

// Where neither --threads nor STRINGRT_THREADS sets the kernel pool, shares
// this machine's cores among the ranks the launcher put on it
// (OMPI_COMM_WORLD_LOCAL_SIZE, MPI_LOCALNRANKS): each gets cores / ranks,
// at least 1, rather than every core. Speed only: the bits do not depend on
// it.
void shareCores(bool threadsGiven);

// Runs `body` on this rank: returns its status, or, when it throws, prints
// the error naming this rank and ends the whole run (every rank) with
// status 1, so that no rank waits for this one.
int onRank(stringrt::Communicator &ranks, const std::function<int()> &body,
           const std::function<void()> &beforeError);

} // namespace stringrun
