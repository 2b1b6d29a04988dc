#!/usr/bin/env python3
"""Trains each model over several seeds and prints a Markdown table of the
final test accuracy (mean, sample standard deviation, range) and wall time,
so that two positional encodings can be compared with the spread of their
runs in view.

Seed s means `stringrun train --seed s --init-seed s`: another data order,
other dropout masks and another draw of the initial parameters.

  scripts/seed_table.py examples/vit_rope.pe examples/vit_cayley.pe \\
      --epochs 1 --seeds 1,2,3 [--batch 128] [--data DIR] [--bin build/bin]
"""
import argparse
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
    log_path = os.path.join(log_dir, f"{os.path.basename(package)}.seed{seed}.log")
    start = time.monotonic()
    with open(log_path, "w") as log:
        result = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT)
    seconds = time.monotonic() - start
    with open(log_path) as log:
        text = log.read()
    if result.returncode != 0:
        sys.exit(f"seed_table: {' '.join(command)} failed (exit {result.returncode}):\n"
                 f"{text[-2000:]}")
    accuracies = [float(m.group(2)) for m in map(ACCURACY.match, text.splitlines()) if m]
    if not accuracies:
        sys.exit(f"seed_table: {' '.join(command)} printed no evaluation (see {log_path})")
    return accuracies[-1], seconds


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
    parser.add_argument("models", nargs="+", help=".pe files")
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--seeds", default="1,2,3", help="comma-separated, each >= 1")
    parser.add_argument("--data", help="instead of each model's data statement")
    parser.add_argument("--bin", default=os.path.join(os.path.dirname(__file__), "..", "build",
                                                      "bin"),
                        help="where stringc and stringrun are")
    args = parser.parse_args()
    try:
        seeds = [int(s) for s in args.seeds.split(",")]
    except ValueError:
        parser.error(f"--seeds needs comma-separated integers, got '{args.seeds}'")
    if not seeds or any(s < 1 for s in seeds):
        parser.error("--seeds needs integers >= 1 (0 is the package's own draw)")
    if args.epochs < 1 or args.batch < 1:
        parser.error("--epochs and --batch must be >= 1")
    stringc = os.path.join(args.bin, "stringc")
    stringrun = os.path.join(args.bin, "stringrun")
    for tool in (stringc, stringrun):
        if not os.access(tool, os.X_OK):
            sys.exit(f"seed_table: {tool} is missing (build it: bash scripts/build.sh "
                     "stringc stringrun)")

    print(f"| model | epochs, batch | seeds | test accuracy: mean +- std (min-max) "
          f"| wall time per run |")
    print("|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="seed_table.") as work:
        for model in args.models:
            name = os.path.splitext(os.path.basename(model))[0]
            package = os.path.join(work, name + ".pkg")
            compiled = subprocess.run([stringc, model, "--target=cpu", "-o", package],
                                      capture_output=True, text=True)
            if compiled.returncode != 0:
                sys.exit(f"seed_table: stringc {model} failed:\n{compiled.stderr}")
            runs = [train(stringrun, package, s, args, work) for s in seeds]
            accuracies = [a for a, _ in runs]
            mean, std = summary(accuracies)
            wall = sum(t for _, t in runs) / len(runs)
            print(f"| `{name}` | {args.epochs}, {args.batch} | {args.seeds} "
                  f"| {mean:.2f}% +- {std:.2f} ({min(accuracies):.2f}-{max(accuracies):.2f}%) "
                  f"| {minutes(wall)} |", flush=True)


if __name__ == "__main__":
    main()
