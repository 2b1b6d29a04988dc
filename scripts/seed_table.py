#!/usr/bin/env python3
"""Trains each model over several seeds and prints a Markdown table of the
final test accuracy (mean, sample standard deviation, range) and wall time,
so that two positional encodings can be compared with the spread of their
runs in view.

Seed s means `stringrun train --seed s --init-seed s`: another data order,
other dropout masks and another draw of the initial parameters.

  scripts/seed_table.py examples/vit_rope.pe examples/vit_cayley.pe \\
      --epochs 1 --seeds 1,2,3 [--batch 128] [--data DIR] [--bin build/bin]

A model given as a package (.pkg) is trained as it is, so no stringc is
needed: on a GPU machine, with the packages of scripts/gpu_packages.sh,

  scripts/seed_table.py gpu/examples/vit_rope.pkg gpu/examples/vit_cayley.pkg \\
      --device cuda --augment crop=4,flip=0.5,erase=0.25 --epochs 12 --jobs 6 \\
      --stringrun build-gpu-runtime/stringrun/stringrun

--jobs N runs N trainings at once (on a GPU, with MPS started, they share
it): the wall times are then those of runs that shared the machine. Without
--augment each model trains with its own declared recipe (the small ViT
examples: label smoothing 0.1 and flips); --augment replaces the
augmentation of every run.
"""
import argparse
import concurrent.futures
import math
import os
import re
import subprocess
import sys
import tempfile
import time

ACCURACY = re.compile(r"^eval after step (\d+): loss [0-9.e+-]+, accuracy ([0-9.]+)%")


def train(stringrun, package, seed, args, log_dir):
    """One run; returns (final test accuracy in %, wall seconds)."""
    command = [stringrun, "train", package, "--seed", str(seed), "--init-seed", str(seed),
               "--epochs", str(args.epochs), "--batch", str(args.batch)]
    if args.data:
        command += ["--data", args.data]
    if args.device:
        command += ["--device", args.device]
    if args.augment:
        command += ["--augment", args.augment]
    log_path = os.path.join(log_dir, f"{os.path.basename(package)}.seed{seed}.log")
    start = time.monotonic()
    with open(log_path, "w") as log:
        result = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT)
    seconds = time.monotonic() - start
    with open(log_path) as log:
        text = log.read()
    if result.returncode != 0:
        raise RunFailed(f"seed_table: {' '.join(command)} failed (exit {result.returncode}):\n"
                        f"{text[-2000:]}")
    accuracies = [float(m.group(2)) for m in map(ACCURACY.match, text.splitlines()) if m]
    if not accuracies:
        raise RunFailed(f"seed_table: {' '.join(command)} printed no evaluation "
                        f"(see {log_path})")
    return accuracies[-1], seconds


class RunFailed(Exception):
    """A training run that failed: its command and the end of its log."""


def summary(values):
    mean = sum(values) / len(values)
    if len(values) < 2:
        return mean, float("nan")
    return mean, math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))


def minutes(seconds):
    whole = int(round(seconds))  # rounded first: 179.6 s is 3 min 00 s, not 2 min 60 s
    return f"{whole // 60} min {whole % 60:02d} s"


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("models", nargs="+", help=".pe files, or packages (.pkg) to train as they are")
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--seeds", default="1,2,3", help="comma-separated, each >= 1")
    parser.add_argument("--data", help="instead of each model's data statement")
    parser.add_argument("--device", help="stringrun train --device (cpu or cuda)")
    parser.add_argument("--augment", help="stringrun train --augment SPEC, for every run")
    parser.add_argument("--jobs", type=int, default=1, help="runs at once (default 1)")
    parser.add_argument("--bin", default=os.path.join(os.path.dirname(__file__), "..", "build",
                                                      "bin"),
                        help="where stringc and stringrun are")
    parser.add_argument("--stringrun", help="the stringrun to run (default: BIN/stringrun)")
    args = parser.parse_args()
    try:
        seeds = [int(s) for s in args.seeds.split(",")]
    except ValueError:
        parser.error(f"--seeds needs comma-separated integers, got '{args.seeds}'")
    if not seeds or any(s < 1 for s in seeds):
        parser.error("--seeds needs integers >= 1 (0 is the package's own draw)")
    if args.epochs < 1 or args.batch < 1 or args.jobs < 1:
        parser.error("--epochs, --batch and --jobs must be >= 1")
    stringc = os.path.join(args.bin, "stringc")
    stringrun = args.stringrun or os.path.join(args.bin, "stringrun")
    needed = [stringrun] + ([stringc] if any(not m.endswith(".pkg") for m in args.models) else [])
    for tool in needed:
        if not os.access(tool, os.X_OK):
            sys.exit(f"seed_table: {tool} is missing (build it: bash scripts/build.sh "
                     "stringc stringrun)")

    shared = f" ({args.jobs} runs at once)" if args.jobs > 1 else ""
    print(f"| model | epochs, batch | seeds | test accuracy: mean +- std (min-max) "
          f"| wall time per run{shared} |")
    print("|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="seed_table.") as work, \
            concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        # Every model compiled first (a broken one stops the table before any
        # run starts), then every run queued (so that --jobs runs overlap
        # across models); the rows are printed in the models' order.
        packages = []
        for model in args.models:
            name = os.path.splitext(os.path.basename(model))[0]
            package = model
            if not model.endswith(".pkg"):
                package = os.path.join(work, f"{len(packages)}-{name}.pkg")
                compiled = subprocess.run([stringc, model, "--target=cpu", "-o", package],
                                          capture_output=True, text=True)
                if compiled.returncode != 0:
                    sys.exit(f"seed_table: stringc {model} failed:\n{compiled.stderr}")
            packages.append(package)
        queued = []
        for index, (model, package) in enumerate(zip(args.models, packages)):
            name = os.path.splitext(os.path.basename(model))[0]
            logs = os.path.join(work, f"{index}-{name}")
            os.makedirs(logs)
            label = f"`{name}`"
            if model.endswith(".pkg"):  # packages of one model may come from several folders
                label += f" ({os.path.dirname(model) or '.'})"
            queued.append((label, [pool.submit(train, stringrun, package, s, args, logs)
                                   for s in seeds]))
        for label, futures in queued:
            try:
                runs = [f.result() for f in futures]
            except RunFailed as failure:
                for _, rest in queued:
                    for f in rest:
                        f.cancel()
                sys.exit(str(failure))
            accuracies = [a for a, _ in runs]
            mean, std = summary(accuracies)
            wall = sum(t for _, t in runs) / len(runs)
            print(f"| {label} | {args.epochs}, {args.batch} | {args.seeds} "
                  f"| {mean:.2f}% +- {std:.2f} ({min(accuracies):.2f}-{max(accuracies):.2f}%) "
                  f"| {minutes(wall)} |", flush=True)


if __name__ == "__main__":
    main()
