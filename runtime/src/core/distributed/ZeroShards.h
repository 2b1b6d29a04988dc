// ZeRO-1 on data-parallel ranks (stringrt/Distributed.h): the messages that
// let each rank hold the optimizer state of its slice of the parameters only
// and still take one process's step bit for bit. Private to the runtime.
#pragma once

#include "stringrt/Distributed.h"
#include "stringrt/Optimizer.h"

#include <cstddef>
#include <string>
#include <vector>

namespace stringrt::detail {

// Where the ranks' slices of `total` elements begin: rank k owns
// [begin[k], begin[k + 1]), begin[k] = total k / ranks (ranks + 1 entries).
std::vector<size_t> rankSlices(size_t total, int ranks);

// The squared norm of every trainable gradient, on every rank, from each
// rank's shard and the gradients of its slice (grads[i - stateBegin()]):
// rank k continues rank k - 1's sum (Optimizer::squaredNorm), and the last
// rank sends the total to every rank. Its additions are the one-process
// step's, in its order, so it is its sum bit for bit; the price is N - 1
// hops one after another, each over one rank's slice.
double chainedSquaredNorm(const Optimizer &shard, const float *grads, Communicator &comm,
                          const std::string &what);

// Every rank's slice of `values` ([slices[k], slices[k + 1])) to every rank.
void allGatherSlices(std::vector<float> &values, const std::vector<size_t> &slices,
                     Communicator &comm, const std::string &what);

// The whole optimizer state into `whole` on rank 0 from every rank's shard
// (one round per state buffer); the other ranks send theirs and leave
// `whole` alone.
void gatherOptimizerState(const Optimizer &shard, const std::vector<size_t> &slices,
                          Optimizer &whole, Communicator &comm, const std::string &what);

} // namespace stringrt::detail
