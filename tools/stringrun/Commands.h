// stringrun's commands on the CPU, or on the GPU through a TrainBackend
// (DeviceRun.h): train (TrainCommand.cpp), eval (EvalCommand.cpp), bench
// (BenchCommand.cpp) and gradients (GradientsCommand.cpp). Each returns the
// exit status; errors are thrown (UsageError, stringrt::Error).
#pragma once

#include "CommandLine.h"
#include "TrainProgress.h"

#include "stringrt/Distributed.h"
#include "stringrt/Model.h"
#include "stringrt/Trainer.h"

namespace stringrun {

// `backend`: where the steps and evaluations run (nullptr: the CPU).
// `ranks`: this process is one rank of a data-parallel run (RankRun.h):
// rank 0 alone prints, logs and checkpoints.
int runTrain(const Args &args, stringrt::Model &model, Printer &printer,
             int replicas, stringrt::TrainBackend *backend = nullptr,
             stringrt::Communicator *ranks = nullptr);

// `backend`: where the evaluation runs (nullptr: the CPU, on `replicas`).
int runEval(const Args &args, stringrt::Model &model, int replicas,
            stringrt::TrainBackend *backend = nullptr);

int runBench(const Args &args, stringrt::Model &model);

int runGradients(const Args &args, stringrt::Model &model);

} // namespace stringrun
