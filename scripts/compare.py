#!/usr/bin/env python3
"""Compares positional encodings: trains each model over several seeds, then
evaluates every run at the training image size and at others, and writes the
results as a CSV file, a Markdown table and two pictures (docs/experiments.md).

  scripts/compare.py examples/vit_rope.pe examples/vit_ape.pe examples/vit_nope.pe \\
      --seeds 1,2 --epochs 2 --eval-sizes 28,36,44 --jobs 2 --out compare

For each model M (a .pe file) and seed s it trains `stringrun train --seed s
--init-seed s` with a checkpoint and a --log CSV, then evaluates the final
parameters at each evaluation size N: at the training size with the package
as compiled, at another with a package compiled with `stringc -D
image_size=N` (--size-constant names the constant) and `stringrun eval
--resize N --resize-positions` (the test images resized bilinearly; a
learned position table resized bicubically, as DeiT and timm do; rotary
encodings take the parameters as they are).

Everything lands in --out (default ./compare):
  packages/M.pkg, packages/M@N.pkg   the packages (recompiled when M changes)
  runs/M/seedS/                      checkpoint.safetensors, log.csv,
                                     train.txt, train.json (done), evalN.json
  results.csv                        one row per run and evaluation size
  results.md                         mean +- std (min-max) over seeds per
                                     model and size, and which models the
                                     seeds separate
  accuracy_epochs.png                test accuracy against the epoch: mean
                                     and min-max band over seeds per model
  accuracy_size.png                  test accuracy against the image size

With --interpolate-positions NAME, a model with the top-level constant NAME
(the examples' `position_scale`, which multiplies the patches' positions) is
also evaluated at each other size N with NAME = its value x trained / N: the
larger grid's positions interpolated into the trained range instead of run
past it (position interpolation). Those rows say `interpolated` in
results.csv's `positions` column (the others `as trained`) and are a series of
their own in the table and the size picture ("M, positions interpolated"),
which shares the training-size evaluation with M. Models without the
constant are evaluated as before (a note says which).

It resumes: a finished training (train.json) or evaluation (evalN.json) is
not redone, and an interrupted training continues from its last checkpoint
(`stringrun train --resume`: the same bits as an unbroken run). Runs made
from another version of a model are refused (use another --out). --jobs N
runs N trainings or evaluations at once, each with --threads (default: the
cores divided among the jobs); results do not depend on either. On a GPU
(--device cuda, packages of --target=cuda) start MPS first to share it.
Exit status 0, 1 when a command fails (its output is shown), 2 on bad usage.
"""
import argparse
import concurrent.futures
import csv
import hashlib
import json
import math
import os
import re
import shlex
import subprocess
import sys
import threading
import time

EVAL = re.compile(r": loss ([0-9.eE+-]+|nan|inf), accuracy ([0-9.]+)%")
CONST = re.compile(r"^const (\w+) = (\S+)$", re.M)
CSV_HEADER = ["example", "seed", "epochs", "steps", "batch", "eval_size", "trained_size",
              "positions", "test_accuracy", "test_loss", "wall_s", "images_per_s"]
INTERPOLATED = "interpolated"


class Failed(Exception):
    """A command that failed: what ran and the end of its output."""


def run_command(command, log_path=None):
    """Runs `command`; its output goes to log_path (or is returned)."""
    if log_path:
        with open(log_path, "a") as log:
            log.write("$ " + " ".join(shlex.quote(c) for c in command) + "\n")
            log.flush()
            result = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT)
        with open(log_path) as log:
            text = log.read()
    else:
        result = subprocess.run(command, capture_output=True, text=True)
        text = result.stdout + result.stderr
    if result.returncode != 0:
        raise Failed(f"compare: {' '.join(shlex.quote(c) for c in command)} failed "
                     f"(exit {result.returncode}):\n{text[-3000:]}")
    return text


def write_json(path, value):
    """Atomically: a killed run leaves the old file or none."""
    temp = f"{path}.tmp.{os.getpid()}.{threading.get_ident()}"
    with open(temp, "w") as f:
        json.dump(value, f, indent=1, sort_keys=True)
    os.replace(temp, path)


def read_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def summary(values):
    """(mean, sample std or nan, min, max)."""
    mean = sum(values) / len(values)
    std = (math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))
           if len(values) > 1 else float("nan"))
    return mean, std, min(values), max(values)


class Progress:
    """One line per event, counting the grid's trainings and evaluations."""

    def __init__(self, trainings, evaluations, done_trainings, done_evaluations):
        self.lock = threading.Lock()
        self.start = time.monotonic()
        self.total = (trainings, evaluations)
        self.done = [done_trainings, done_evaluations]

    def event(self, kind, text):
        with self.lock:
            if kind is not None:
                self.done[kind] += 1
            seconds = int(time.monotonic() - self.start)
            print(f"compare: [{self.done[0]}/{self.total[0]} trained, "
                  f"{self.done[1]}/{self.total[1]} evaluated, {seconds // 60}:{seconds % 60:02d}] "
                  f"{text}", flush=True)


class Grid:
    def __init__(self, args):
        self.args = args
        self.out = args.out
        self.packages_dir = os.path.join(self.out, "packages")
        self.stringc = args.stringc or os.path.join(args.bin, "stringc")
        self.stringrun = args.stringrun or os.path.join(args.bin, "stringrun")
        self.models = []  # (name, path, trained size)
        # name -> the value of --interpolate-positions' constant in the file,
        # for the models that have it
        self.position_scale = {}

    # --- packages ---------------------------------------------------------

    def package(self, name, size=None, interpolated=False):
        suffix = "" if size is None else f"@{size}"
        suffix += "-interpolated" if interpolated else ""
        return os.path.join(self.packages_dir, f"{name}{suffix}.pkg")

    def interpolated_scale(self, name, trained, size):
        """The position constant's value that maps a size x size image's grid
        into the trained one's range."""
        return self.position_scale[name] * trained / size

    def compile(self, path, output, defines):
        command = [self.stringc, path, f"--target={self.target()}", "-o", output]
        for define in defines:
            command += ["-D", define]
        run_command(command)

    def target(self):
        return "cuda" if self.args.device == "cuda" else "cpu"

    def prepare(self):
        """Compiles what is missing or out of date; returns the models."""
        os.makedirs(self.packages_dir, exist_ok=True)
        names = {}
        for path in self.args.models:
            name = os.path.splitext(os.path.basename(path))[0]
            if name in names:
                raise Failed(f"compare: {path} and {names[name]} have one name; rename one")
            names[name] = path
            graph = run_command([self.stringc, path, "--emit=graph"])
            constants = dict(CONST.findall(graph))
            size_name = self.args.size_constant
            if size_name not in constants or not constants[size_name].isdigit():
                raise Failed(f"compare: {path} has no integer top-level constant "
                             f"'{size_name}' (the image size -D sets; --size-constant "
                             f"names another)")
            trained = int(constants[size_name])
            scale_name = self.args.interpolate_positions
            if scale_name and scale_name in constants:
                try:
                    self.position_scale[name] = float(constants[scale_name])
                except ValueError:
                    raise Failed(f"compare: {path}'s constant '{scale_name}' is "
                                 f"'{constants[scale_name]}', not a number")
            elif scale_name:
                print(f"compare: {path} has no constant '{scale_name}': evaluated with its "
                      f"positions as trained only", flush=True)
            source = {"sha256": sha256(path), "target": self.target(),
                      "size_constant": size_name}
            stamp = os.path.join(self.packages_dir, f"{name}.json")
            fresh = read_json(stamp) == source
            runs = os.path.join(self.out, "runs", name)
            if not fresh and os.path.isdir(runs) and os.listdir(runs):
                raise Failed(f"compare: {runs} holds runs of another version of {path} "
                             f"(or another device); give another --out")
            others = [s for s in self.args.eval_sizes if s != trained]
            variants = [(None, False)] + [(s, False) for s in others]
            if name in self.position_scale:
                variants += [(s, True) for s in others]
            for size, interpolated in variants:
                output = self.package(name, size, interpolated)
                if fresh and os.path.exists(output):
                    continue
                defines = [] if size is None else [f"{size_name}={size}"]
                if interpolated:
                    defines.append(f"{scale_name}={self.interpolated_scale(name, trained, size)!r}")
                print(f"compare: compiling {path}" + "".join(f" -D {d}" for d in defines),
                      flush=True)
                self.compile(path, output, defines)
            write_json(stamp, source)
            self.models.append((name, path, trained))

    # --- runs -------------------------------------------------------------

    def run_dir(self, name, seed):
        return os.path.join(self.out, "runs", name, f"seed{seed}")

    def length(self):
        return {"epochs": self.args.epochs, "steps": self.args.steps, "batch": self.args.batch}

    def common(self):
        extra = ["--threads", str(self.args.threads)]
        if self.args.data:
            extra += ["--data", self.args.data]
        if self.args.device:
            extra += ["--device", self.args.device]
        return extra

    def trained(self, name, seed):
        done = read_json(os.path.join(self.run_dir(name, seed), "train.json"))
        if done is not None and {k: done.get(k) for k in self.length()} != self.length():
            raise Failed(f"compare: {self.run_dir(name, seed)} was trained with "
                         f"{ {k: done.get(k) for k in self.length()} }, not {self.length()}; "
                         f"give another --out")
        return done

    def train(self, name, seed, progress):
        directory = self.run_dir(name, seed)
        os.makedirs(directory, exist_ok=True)
        checkpoint = os.path.join(directory, "checkpoint.safetensors")
        log = os.path.join(directory, "log.csv")
        command = [self.stringrun, "train", self.package(name), "--checkpoint", checkpoint,
                   "--log", log] + self.common()
        if self.args.augment:
            command += ["--augment", self.args.augment]
        resumed = os.path.exists(checkpoint)
        if resumed:  # the checkpoint knows the seed, the batch and the run's length
            command += ["--resume", checkpoint]
        else:
            command += ["--seed", str(seed), "--init-seed", str(seed),
                        "--batch", str(self.args.batch)]
            command += (["--steps", str(self.args.steps)] if self.args.steps
                        else ["--epochs", str(self.args.epochs)])
        progress.event(None, f"{name} seed {seed}: training"
                       + (" (resumed from its checkpoint)" if resumed else ""))
        start = time.monotonic()
        run_command(command, os.path.join(directory, "train.txt"))
        seconds = time.monotonic() - start
        # Wall time: the training processes that finished (a resumed run adds
        # the segment that completed it to the ones recorded before).
        before = read_json(os.path.join(directory, "segments.json")) or []
        segments = before + [seconds]
        write_json(os.path.join(directory, "segments.json"), segments)
        speeds = [float(row["units_per_s"]) for row in read_log(log)
                  if row["kind"] == "train" and row["units_per_s"]]
        done = dict(self.length(), wall_s=sum(segments),
                    images_per_s=sum(speeds) / len(speeds) if speeds else float("nan"))
        write_json(os.path.join(directory, "train.json"), done)
        progress.event(0, f"{name} seed {seed}: trained in {seconds:.1f} s")

    @staticmethod
    def eval_file(size, interpolated):
        return f"eval{size}" + ("-interpolated" if interpolated else "") + ".json"

    def evaluated(self, name, seed, size, interpolated=False):
        return read_json(os.path.join(self.run_dir(name, seed), self.eval_file(size, interpolated)))

    def evaluations(self, name, trained_size):
        """(size, interpolated) of every evaluation of a run of `name`."""
        plain = [(s, False) for s in self.eval_sizes(trained_size)]
        if name not in self.position_scale:
            return plain
        return plain + [(s, True) for s in self.eval_sizes(trained_size) if s != trained_size]

    def evaluate(self, name, trained_size, seed, size, interpolated, progress):
        directory = self.run_dir(name, seed)
        checkpoint = os.path.join(directory, "checkpoint.safetensors")
        if size == trained_size:
            command = [self.stringrun, "eval", self.package(name), "--params", checkpoint]
        else:
            command = [self.stringrun, "eval", self.package(name, size, interpolated), "--params",
                       checkpoint, "--resize", str(size), "--resize-positions"]
        command += ["--batch", str(self.args.batch)] + self.common()
        text = run_command(command)
        match = EVAL.search(text)
        if not match:
            raise Failed(f"compare: {' '.join(command)} printed no accuracy:\n{text[-2000:]}")
        result = {"loss": float(match.group(1)), "accuracy": float(match.group(2))}
        write_json(os.path.join(directory, self.eval_file(size, interpolated)), result)
        how = ", positions interpolated" if interpolated else ""
        progress.event(1, f"{name} seed {seed} at {size} px{how}: {result['accuracy']:.2f}%")

    def run_all(self):
        todo = []  # (name, trained size, seed, train?, [sizes to evaluate])
        trainings = evaluations = done_trainings = done_evaluations = 0
        for name, _, trained_size in self.models:
            for seed in self.args.seeds:
                needs_training = self.trained(name, seed) is None
                every = self.evaluations(name, trained_size)
                missing = [e for e in every
                           if needs_training or self.evaluated(name, seed, *e) is None]
                trainings += 1
                evaluations += len(every)
                done_trainings += 0 if needs_training else 1
                done_evaluations += len(every) - len(missing)
                if needs_training or missing:
                    todo.append((name, trained_size, seed, needs_training, missing))
        progress = Progress(trainings, evaluations, done_trainings, done_evaluations)
        if not todo:
            progress.event(None, "nothing to run: every training and evaluation is done")
            return

        def work(item):
            name, trained_size, seed, needs_training, missing = item
            if needs_training:
                self.train(name, seed, progress)
            for size, interpolated in missing:
                self.evaluate(name, trained_size, seed, size, interpolated, progress)

        with concurrent.futures.ThreadPoolExecutor(self.args.jobs) as pool:
            futures = [pool.submit(work, item) for item in todo]
            try:
                for future in concurrent.futures.as_completed(futures):
                    future.result()
            except Failed:
                for future in futures:
                    future.cancel()
                raise

    def eval_sizes(self, trained_size):
        """The evaluation sizes, the training size always among them."""
        return sorted(set(self.args.eval_sizes) | {trained_size})

    # --- outputs ----------------------------------------------------------

    def rows(self):
        rows = []
        for name, _, trained_size in self.models:
            for seed in self.args.seeds:
                done = self.trained(name, seed)
                for size, interpolated in self.evaluations(name, trained_size):
                    result = self.evaluated(name, seed, size, interpolated)
                    rows.append({
                        "example": name, "seed": seed, "epochs": self.args.epochs or "",
                        "steps": self.args.steps or "", "batch": self.args.batch,
                        "eval_size": size, "trained_size": trained_size,
                        "positions": INTERPOLATED if interpolated else "as trained",
                        "test_accuracy": f"{result['accuracy']:.2f}",
                        "test_loss": f"{result['loss']:.6f}",
                        "wall_s": f"{done['wall_s']:.2f}",
                        "images_per_s": f"{done['images_per_s']:.1f}"})
        return rows

    def write_outputs(self, command_line):
        rows = self.rows()
        with open(os.path.join(self.out, "results.csv"), "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=CSV_HEADER)
            writer.writeheader()
            writer.writerows(rows)
        with open(os.path.join(self.out, "results.md"), "w") as f:
            f.write(markdown(rows, self.models, self.args, command_line))
        plot_epochs(self, os.path.join(self.out, "accuracy_epochs.png"))
        plot_sizes(rows, self.models, os.path.join(self.out, "accuracy_size.png"))


def read_log(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def duration(seconds):
    if seconds < 60:
        return f"{seconds:.1f} s"
    whole = int(round(seconds))
    return f"{whole // 60} min {whole % 60:02d} s"


def cell(values):
    mean, std, low, high = summary(values)
    spread = "n/a" if math.isnan(std) else f"{std:.2f}"
    return f"{mean:.2f}% +- {spread} ({low:.2f}-{high:.2f})"


def interpolated_label(example):
    return f"{example}, positions interpolated"


def series_of(row):
    """A row's series: its example, or "M, positions interpolated"."""
    if row["positions"] == INTERPOLATED:
        return interpolated_label(row["example"])
    return row["example"]


def series(rows, models):
    """(label, example, trained size) of each series, a model's interpolated
    one right after it."""
    labels = {series_of(r) for r in rows}
    result = []
    for name, _, trained in models:
        result.append((name, name, trained))
        label = interpolated_label(name)
        if label in labels:
            result.append((label, name, trained))
    return result


def accuracies(rows):
    """(series, size) -> the accuracies over seeds; an interpolated series
    shares its model's evaluation at the training size (the same package)."""
    by = {}
    for r in rows:
        by.setdefault((series_of(r), int(r["eval_size"])), []).append(float(r["test_accuracy"]))
    interpolated = {r["example"] for r in rows if r["positions"] == INTERPOLATED}
    for r in rows:
        if r["example"] in interpolated and r["positions"] != INTERPOLATED \
                and r["eval_size"] == r["trained_size"]:
            label = interpolated_label(r["example"])
            by.setdefault((label, int(r["eval_size"])), []).append(float(r["test_accuracy"]))
    return by


def markdown(rows, models, args, command_line):
    sizes = sorted({int(r["eval_size"]) for r in rows})
    by = accuracies(rows)
    all_series = series(rows, models)
    trained = {label: size for label, _, size in all_series}
    length = f"{args.steps} steps" if args.steps else f"{args.epochs} epoch{'s' * (args.epochs != 1)}"
    lines = [f"Test accuracy over seeds {','.join(map(str, args.seeds))}: mean +- sample std "
             f"(min-max), {length} at batch {args.batch}, trained at the size marked *.", "",
             f"    {command_line}", "",
             "| model | " + " | ".join(f"{s} px" for s in sizes) + " | wall time per run | images/s |",
             "|---|" + "---|" * (len(sizes) + 2)]
    for name, example, _ in all_series:
        runs = [r for r in rows if r["example"] == example and r["positions"] != INTERPOLATED
                and int(r["eval_size"]) == trained[name]]
        wall = sum(float(r["wall_s"]) for r in runs) / len(runs)
        speed = sum(float(r["images_per_s"]) for r in runs) / len(runs)
        cells = [cell(by[(name, s)]) + ("*" if s == trained[name] else "") if (name, s) in by
                 else "" for s in sizes]
        lines.append(f"| `{name}` | " + " | ".join(cells) + f" | {duration(wall)} | {speed:.0f} |")
    lines += ["", "Two models are separated at a size when their means differ by more than "
              "twice the larger of their standard deviations; otherwise they lie within "
              "their spread."]
    for size in sizes:
        separated, within = [], []
        # (an interpolated series at the training size is its model's evaluation)
        present = [n for n, example, t in all_series
                   if (n, size) in by and not (n != example and size == t)]
        for i, a in enumerate(present):
            for b in present[i + 1:]:
                ma, sa, _, _ = summary(by[(a, size)])
                mb, sb, _, _ = summary(by[(b, size)])
                gap = ma - mb
                text = f"`{a}` - `{b}` {gap:+.2f}"
                spread = max(sa, sb)
                if math.isnan(spread):
                    within.append(text + " (one seed: no spread)")
                elif abs(gap) > 2 * spread:
                    separated.append(text + f" (> 2 x {spread:.2f})")
                else:
                    within.append(text + f" (<= 2 x {spread:.2f})")
        lines.append(f"- {size} px: separated: {', '.join(separated) or 'none'}; "
                     f"within their spread: {', '.join(within) or 'none'}.")
    return "\n".join(lines) + "\n"


def plot_epochs(grid, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name, _, _ in grid.models:
        curves = []
        for seed in grid.args.seeds:
            log = os.path.join(grid.run_dir(name, seed), "log.csv")
            points = {}
            for row in read_log(log):
                if row["kind"] == "eval" and row["accuracy"]:
                    points[float(row["epoch"])] = 100 * float(row["accuracy"])
            curves.append(points)
        epochs = sorted(set.intersection(*(set(c) for c in curves)))
        if not epochs:
            continue
        values = [[c[e] for c in curves] for e in epochs]
        mean = [sum(v) / len(v) for v in values]
        line, = ax.plot(epochs, mean, marker="o", label=name)
        ax.fill_between(epochs, [min(v) for v in values], [max(v) for v in values],
                        color=line.get_color(), alpha=0.2)
    ax.set_xlabel("epoch")
    ax.set_ylabel("test accuracy (%)")
    ax.set_title(f"test accuracy: mean and min-max over seeds {','.join(map(str, grid.args.seeds))}")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def plot_sizes(rows, models, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7, 4.5))
    by = accuracies(rows)
    colors = {}
    for label, example, _ in series(rows, models):
        sizes = sorted(s for (l, s) in by if l == label)
        values = [by[(label, s)] for s in sizes]
        mean = [sum(v) / len(v) for v in values]
        # an interpolated series: dashed, in its model's colour
        style = {"linestyle": "--", "color": colors[example]} if label != example else {}
        line, = ax.plot(sizes, mean, marker="o", label=label, **style)
        colors.setdefault(example, line.get_color())
        ax.fill_between(sizes, [min(v) for v in values], [max(v) for v in values],
                        color=line.get_color(), alpha=0.2)
    trained_sizes = sorted({t for _, _, t in models})
    for t in trained_sizes:
        ax.axvline(t, color="gray", linestyle=":", linewidth=1)
    ax.set_xlabel("image size at evaluation (px; dotted: trained)")
    ax.set_ylabel("test accuracy (%)")
    ax.set_title("test accuracy against the image size: mean and min-max over seeds")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def int_list(text, what, minimum):
    try:
        values = [int(s) for s in text.split(",") if s]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{what} needs comma-separated integers, got '{text}'")
    if not values or any(v < minimum for v in values) or len(set(values)) != len(values):
        raise argparse.ArgumentTypeError(f"{what} needs distinct integers >= {minimum}, "
                                         f"got '{text}'")
    return values


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("models", nargs="+", help=".pe files")
    parser.add_argument("--seeds", default="1,2,3",
                        type=lambda t: int_list(t, "--seeds", 1),
                        help="comma-separated, each >= 1 (default 1,2,3)")
    length = parser.add_mutually_exclusive_group()
    length.add_argument("--epochs", type=int, help="epochs of each training (default 1)")
    length.add_argument("--steps", type=int,
                        help="optimizer steps of each training instead of epochs")
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--eval-sizes", default=None,
                        type=lambda t: int_list(t, "--eval-sizes", 1),
                        help="image sizes to evaluate at, e.g. 28,36,44 (default: the "
                             "training size)")
    parser.add_argument("--size-constant", default="image_size",
                        help="the models' constant that stringc -D sets for another size")
    parser.add_argument("--interpolate-positions", metavar="NAME",
                        help="also evaluate the models with the constant NAME (the examples' "
                             "position_scale) at each other size N with NAME x trained / N")
    parser.add_argument("--device", choices=["cpu", "cuda"])
    parser.add_argument("--data", help="instead of each model's data statement")
    parser.add_argument("--augment", help="stringrun train --augment SPEC for every run")
    parser.add_argument("--jobs", type=int, default=1, help="commands at once (default 1)")
    parser.add_argument("--threads", type=int,
                        help="stringrun --threads of each (default: the cores / --jobs)")
    parser.add_argument("--out", default="compare", help="the results' folder")
    parser.add_argument("--bin", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                      "..", "build", "bin"),
                        help="where stringc and stringrun are (default: build/bin)")
    parser.add_argument("--stringc", help="the stringc to run (default: BIN/stringc)")
    parser.add_argument("--stringrun", help="the stringrun to run (default: BIN/stringrun)")
    args = parser.parse_args()
    if args.steps is None and args.epochs is None:
        args.epochs = 1
    for option in ("epochs", "steps", "batch", "jobs", "threads"):
        value = getattr(args, option)
        if value is not None and value < 1:
            parser.error(f"--{option} must be >= 1")
    if args.threads is None:
        args.threads = max(1, (os.cpu_count() or 1) // args.jobs)
    args.eval_sizes = args.eval_sizes or []
    grid = Grid(args)
    for tool in (grid.stringc, grid.stringrun):
        if not os.access(tool, os.X_OK):
            sys.exit(f"compare: {tool} is missing (build it: bash scripts/build.sh stringc "
                     "stringrun)")
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        sys.exit(f"compare: {sys.executable} cannot import matplotlib (Debian: "
                 "python3-matplotlib; run with /usr/bin/python3)")
    command_line = "scripts/compare.py " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    try:
        grid.prepare()
        grid.run_all()
        grid.write_outputs(command_line)
    except Failed as failure:
        sys.exit(str(failure))
    print(f"compare: wrote {os.path.join(args.out, 'results.csv')}, results.md, "
          f"accuracy_epochs.png and accuracy_size.png", flush=True)


if __name__ == "__main__":
    main()
