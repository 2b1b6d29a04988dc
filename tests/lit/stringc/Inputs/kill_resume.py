"""Kills `stringrun train --checkpoint` at random moments and checks the run
survives it (tests/lit/stringc/kill-resume.test).

kill_resume.py STRINGRUN PACKAGE DATA WORKDIR [--kills N] [--seed S] [--epochs E]

1. An unbroken run of E epochs (3 steps each, a checkpoint after every
   epoch) gives the reference log and final checkpoint.
2. The same run is started, SIGKILLed after a random delay (seeded; the
   delays are spread so that about N kills fit in one run, and land in
   steps, evaluations and checkpoint writes alike), and resumed from its
   checkpoint, again and again. After every kill the checkpoint, if any,
   must load (`stringrun eval --resume`) and be at an epoch boundary. When a
   run gets to its end before the kill, its final checkpoint and logs are
   checked and a new run begins. After N kills the last run is let finish.
3. Every train and eval row any attempt logged must equal the reference
   row of that step (loss, learning rate, gradient norm, accuracy: printed
   with 9 significant digits, which pins a float32 loss bit for bit), every
   step must have been logged, and each run's final checkpoint must be
   byte for byte the reference's (parameters and optimizer state).

Prints one "ok: ..." line, or the first failure and exits 1.
"""
import argparse
import os
import random
import re
import signal
import subprocess
import sys
import time

STEPS_PER_EPOCH = 3  # 12 training images (make_tiny_idx.py), batch 4


def fail(message):
    print("FAIL: " + message)
    sys.exit(1)


class Runs:
    def __init__(self, args):
        self.args = args
        self.common = [args.package, "--data", args.data, "--batch", "4"]
        self.total = args.epochs * STEPS_PER_EPOCH

    def train_command(self, checkpoint, log, resume):
        command = [self.args.stringrun, "train"] + self.common
        if resume:
            command += ["--resume", checkpoint]
        else:
            command += ["--epochs", str(self.args.epochs), "--seed", "5"]
        return command + ["--checkpoint", checkpoint, "--log", log]

    def checkpoint_step(self, checkpoint):
        """Loads the checkpoint as `stringrun eval --resume` does; its step."""
        done = subprocess.run(
            [self.args.stringrun, "eval"] + self.common + ["--resume", checkpoint],
            capture_output=True, text=True)
        if done.returncode != 0:
            fail(f"the checkpoint left by a kill does not load: {done.stderr.strip()}")
        match = re.search(r"\(step (\d+)\)", done.stdout)
        if not match:
            fail(f"no step in the eval output: {done.stdout.strip()}")
        step = int(match.group(1))
        if step % STEPS_PER_EPOCH != 0 or not 0 < step <= self.total:
            fail(f"the checkpoint is at step {step}, not at an epoch boundary of the run")
        return step


def read_rows(path):
    """The log's complete rows as {(kind, step): columns}; a row cut short by
    a kill (no newline yet) is dropped."""
    rows = {}
    if not os.path.exists(path):
        return rows
    with open(path) as f:
        text = f.read()
    for line in text.split("\n")[:-1]:
        if line.startswith("kind,"):
            continue
        fields = line.split(",")
        # kind, step, epoch, loss, lr, grad_norm, accuracy, perplexity; the
        # last column (throughput) depends on the clock.
        key = (fields[0], int(fields[1]))
        value = fields[:8]
        if key in rows and rows[key] != value:
            fail(f"{path}: step {key} logged twice, differently")
        rows[key] = value
    return rows


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("stringrun")
    parser.add_argument("package")
    parser.add_argument("data")
    parser.add_argument("workdir")
    parser.add_argument("--kills", type=int, default=25)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--epochs", type=int, default=300)
    args = parser.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    runs = Runs(args)

    reference_ckpt = os.path.join(args.workdir, "reference.ckpt")
    reference_log = os.path.join(args.workdir, "reference.csv")
    start = time.monotonic()
    subprocess.run(runs.train_command(reference_ckpt, reference_log, False),
                   check=True, stdout=subprocess.DEVNULL)
    duration = time.monotonic() - start
    reference = read_rows(reference_log)
    if sum(1 for kind, _ in reference if kind == "train") != runs.total:
        fail(f"the reference log has not {runs.total} train rows")
    with open(reference_ckpt, "rb") as f:
        reference_bytes = f.read()

    rng = random.Random(args.seed)
    kills = loads = attempts = completed = 0
    run_index = 0
    logged = {}

    def check_finished_run(checkpoint):
        with open(checkpoint, "rb") as f:
            if f.read() != reference_bytes:
                fail(f"run {run_index}: the final checkpoint differs from the unbroken run's")
        missing = [key for key in reference if key not in logged]
        if missing:
            fail(f"run {run_index}: rows {missing[:5]} were never logged")

    checkpoint = None
    while True:
        if checkpoint is None:
            run_index += 1
            checkpoint = os.path.join(args.workdir, f"run{run_index}.ckpt")
            logged = {}
        resume = os.path.exists(checkpoint)
        if resume and runs.checkpoint_step(checkpoint) == runs.total:
            # Killed after its last checkpoint: the run is complete.
            check_finished_run(checkpoint)
            completed += 1
            checkpoint = None
            continue
        attempts += 1
        log = os.path.join(args.workdir, f"attempt{attempts}.csv")
        process = subprocess.Popen(runs.train_command(checkpoint, log, resume),
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        finished = True
        if kills < args.kills:
            try:
                process.wait(timeout=rng.uniform(0, 2 * duration / args.kills))
            except subprocess.TimeoutExpired:
                process.send_signal(signal.SIGKILL)
                process.wait()
                kills += 1
                finished = False
        else:
            process.wait()
        if finished and process.returncode != 0:
            fail(f"attempt {attempts} exited {process.returncode}: "
                 f"{process.stderr.read().decode().strip()}")
        process.stderr.close()
        for key, value in read_rows(log).items():
            if key not in reference:
                fail(f"attempt {attempts} logged {key}, which the unbroken run did not")
            if value != reference[key]:
                fail(f"attempt {attempts}: {key} is {value}, the unbroken run logged "
                     f"{reference[key]}")
            logged[key] = value
        if finished:
            check_finished_run(checkpoint)
            completed += 1
            checkpoint = None
            if kills >= args.kills:
                break
        elif os.path.exists(checkpoint):
            runs.checkpoint_step(checkpoint)
            loads += 1

    leftovers = [n for n in os.listdir(args.workdir) if ".tmp." in n]
    print(f"ok: {kills} kills in {attempts} attempts, {loads} checkpoints left by a kill "
          f"loaded, {completed} runs of {runs.total} steps finished with the unbroken "
          f"run's losses and final checkpoint bit for bit "
          f"({len(leftovers)} temporary files left by kills during a write)")


if __name__ == "__main__":
    main()
