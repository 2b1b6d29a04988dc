#!/usr/bin/env python3
"""Data-parallel training on CPU ranks under mpirun (docs/distributed.md).

test_ranks.py STRINGC STRINGRUN INPUTS WORKDIR MODE [N]

MODE
  equal N    `mpirun -np N stringrun train` logs the losses, learning rates,
             gradient norms and evaluations of one process with
             `--accumulate N` and ends with its checkpoint, bit for bit; a
             second run of the ranks is identical to the first.
  accumulate N  N ranks with `--accumulate 2` (each share in 2 micro-batches)
             log one process's `--accumulate 2N` training rows and write its
             parameters within test_gpu_ranks.TOLERANCE (the shares' pieces
             are summed on their ranks: not bit for bit); a second run is
             identical; a batch under 2N is refused.
  resume     ranks stopped (--stop-after) and resumed with the same N and
             with another N at the same global batch end as one process with
             --accumulate (N then N') does, bit for bit.
  zero N     the same with `--zero 1` (ZeRO-1: each rank holds the optimizer
             state of its slice only): one process's rows and checkpoint,
             bit for bit, and rank 0's line of the state each rank holds
             equals what the model's parameter count and optimizer give.
  zero2 N    the same with `--zero 2` (ZeRO-2: the gradients sharded too,
             each rank keeping its slice of the summed gradient only): one
             process's rows and checkpoint, bit for bit; rank 0's lines of
             the state and of the gradients each rank holds equal what the
             model's parameter count and optimizer give (each rank checks
             it holds that much after every step's sum).
  zero_resume  ZeRO-1 and ZeRO-2 ranks stopped and resumed on another N,
             with and without --zero, with the other stage, and replicated
             ranks resumed with --zero, as one process with --accumulate (2
             then 3), bit for bit; and on the same N as the ranks unbroken.
  killed     rank 1 of 3 killed with SIGKILL mid-run: the run stops within a
             bounded time, non-zero, naming rank 1; the last checkpoint loads.
  hung       rank 1 of 3 stopped with SIGSTOP: the other ranks stop after
             --rank-timeout, non-zero, naming rank 1; the checkpoint loads.

Exits 77 (CTest's skip) where mpirun is missing or stringrun was built
without MPI.
"""
import json
import os
import re
import shutil
import struct
import signal
import subprocess
import sys
import time

SKIP = 77
TRAIN = ["--batch", "6", "--threads", "1", "--augment", "flip=0.5", "--kernels", "fast"]


def main():
    stringc, stringrun, inputs, work, mode = sys.argv[1:6]
    ranks = int(sys.argv[6]) if len(sys.argv) > 6 else 2
    mpirun = shutil.which("mpirun")
    if mpirun is None:
        print("skipped: no mpirun (install openmpi-bin)")
        return SKIP
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    # The stringrun lit tests' tiny images: 12 train, 6 test, 3 classes.
    make_idx = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lit", "stringc",
                            "Inputs", "make_tiny_idx.py")
    run([sys.executable, make_idx, os.path.join(work, "data")])
    pkg = os.path.join(work, "m.pkg")
    run([stringc, os.path.join(inputs, "tiny_vit_dp.pe"), "--target=cpu", "-o", pkg])
    t = Tools(mpirun, stringrun, pkg, os.path.join(work, "data"), work)
    probe = t.ranks(2, "probe", ["--steps", "1", "--no-eval"], check=False)
    if "built without MPI" in probe.stderr:
        print("skipped: stringrun was built without MPI")
        return SKIP
    if probe.returncode != 0:
        sys.exit(f"mpirun -np 2 stringrun failed:\n{probe.stdout}\n{probe.stderr}")
    return {"equal": equal, "accumulate": accumulate, "resume": resume, "zero": zero,
            "zero2": zero2, "zero_resume": zero_resume,
            "killed": killed, "hung": hung}[mode](t, ranks)


def run(cmd, check=True, env=None, timeout=300):
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    if check and p.returncode != 0:
        sys.exit(f"failed ({p.returncode}): {' '.join(cmd)}\n{p.stdout}\n{p.stderr}")
    return p


def mpi_env(tag=""):
    env = dict(os.environ)
    env.update({"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
                # Containers often refuse the cross-memory attach.
                "OMPI_MCA_btl_vader_single_copy_mechanism": "none",
                "STRINGC_DP_TEST": tag})
    return env


class Tools:
    def __init__(self, mpirun, stringrun, pkg, data, work):
        self.mpirun, self.stringrun, self.pkg, self.data, self.work = (
            mpirun, stringrun, pkg, data, work)

    def path(self, name):
        return os.path.join(self.work, name)

    def train_args(self, name, extra, train=None):
        return ([self.stringrun, "train", self.pkg, "--data", self.data, "--log",
                 self.path(name + ".csv"), "--checkpoint", self.path(name + ".ckpt")]
                + (train or TRAIN) + extra)

    def mpi_cmd(self, n, name, extra, train=None):
        return ([self.mpirun, "--oversubscribe", "--bind-to", "none", "-np", str(n)]
                + self.train_args(name, extra, train))

    def one(self, name, extra):
        return run(self.train_args(name, extra))

    def ranks(self, n, name, extra, check=True):
        return run(self.mpi_cmd(n, name, extra), check=check, env=mpi_env())


def log_rows(path):
    """The log without its speed column (the last), which is wall time."""
    with open(path) as f:
        return [",".join(line.rstrip("\n").split(",")[:-1]) for line in f]


def same(a_name, b_name, t, train_only=False):
    a, b = log_rows(t.path(a_name + ".csv")), log_rows(t.path(b_name + ".csv"))
    if train_only:
        a = [row for row in a if row.startswith("train,")]
        b = [row for row in b if row.startswith("train,")]
    if a != b:
        diff = next(i for i, (x, y) in enumerate(zip(a + [""], b + [""])) if x != y)
        sys.exit(f"{a_name}.csv and {b_name}.csv differ at line {diff + 1}:\n"
                 f"  {a[diff] if diff < len(a) else '(end)'}\n"
                 f"  {b[diff] if diff < len(b) else '(end)'}")
    with open(t.path(a_name + ".ckpt"), "rb") as f, open(t.path(b_name + ".ckpt"), "rb") as g:
        if f.read() != g.read():
            sys.exit(f"{a_name}.ckpt and {b_name}.ckpt differ")
    return len(a)


def equal(t, n):
    # 3 epochs of 2 steps: evaluations (and the EMA's) and checkpoints at
    # every epoch's end.
    extra = ["--steps", "6", "--seed", "3"]
    t.one("one", extra + ["--accumulate", str(n)])
    out = t.ranks(n, "ranks", extra).stdout
    if f"data-parallel on {n} ranks" not in out or "trained 6 steps" not in out:
        sys.exit(f"unexpected output of the ranks:\n{out}")
    if out.count("training 'tiny_vit_dp'") != 1:
        sys.exit(f"more than rank 0 printed:\n{out}")
    rows = same("one", "ranks", t)
    t.ranks(n, "again", extra)
    same("ranks", "again", t)
    # And not by accident: the whole batch at once is another step's bits.
    t.one("whole", extra)
    if log_rows(t.path("whole.csv")) == log_rows(t.path("one.csv")):
        sys.exit("the whole batch logs --accumulate's bits: the test cannot tell them apart")
    print(f"ok: {n} ranks log --accumulate {n}'s {rows - 1} rows and write its checkpoint bit "
          f"for bit; a second run is identical")
    return 0


def accumulate(t, n):
    from test_gpu_ranks import TOLERANCE, compare  # (the same comparison as GPU ranks')
    extra = ["--steps", "6", "--seed", "3"]
    t.one("one", extra + ["--accumulate", str(2 * n)])
    out = t.ranks(n, "ranks", extra + ["--accumulate", "2"]).stdout
    split = (f"data-parallel on {n} ranks: each takes its share of every batch in 2 "
             f"micro-batches, as --accumulate {2 * n} splits it")
    if split not in out or "trained 6 steps" not in out:
        sys.exit(f"unexpected output of the ranks:\n{out}")
    exact, worst = compare(t, "one", "ranks", 6,
                           (f"with --accumulate {2 * n}", f"on {n} ranks with --accumulate 2"))
    t.ranks(n, "again", extra + ["--accumulate", "2"])
    same("ranks", "again", t)
    small = 2 * n - 1
    train = list(TRAIN)
    train[train.index("--batch") + 1] = str(small)
    p = run(t.mpi_cmd(n, "small", ["--steps", "1", "--accumulate", "2"], train), check=False,
            env=mpi_env())
    want = (f"a batch of {small} examples cannot be shared by {n} ranks in 2 micro-batches "
            f"each (--accumulate 2): give --batch >= {2 * n}")
    if p.returncode == 0 or want not in p.stderr:
        sys.exit(f"--batch {small} on {n} ranks with --accumulate 2 was not refused as "
                 f"expected:\n{p.stdout}\n{p.stderr}")
    print(f"ok: {n} ranks with --accumulate 2 log --accumulate {2 * n}'s training rows and "
          f"write its parameters ({'bit for bit' if exact else f'within {worst:.2g}'}; "
          f"tolerance {TOLERANCE}); a second run is identical; --batch {small} refused")
    return 0


def resume(t, _):
    extra = ["--steps", "8", "--seed", "5"]
    # One process: 3 steps with --accumulate 2, then the rest with 3.
    t.one("one", extra + ["--accumulate", "2", "--stop-after", "3"])
    t.one("one", extra + ["--accumulate", "3", "--resume", t.path("one.ckpt")])
    t.ranks(2, "ranks", extra + ["--stop-after", "3"])
    t.ranks(3, "ranks", extra + ["--resume", t.path("ranks.ckpt")])
    same("one", "ranks", t)
    # The same N: ranks stopped and resumed equal ranks unbroken.
    t.ranks(2, "unbroken", extra)
    t.ranks(2, "broken", extra + ["--stop-after", "5"])
    t.ranks(2, "broken", extra + ["--resume", t.path("broken.ckpt")])
    # (the broken run also evaluated where it stopped)
    same("unbroken", "broken", t, train_only=True)
    print("ok: resumed on 3 ranks after 2 as one process with --accumulate 2 then 3; "
          "2 ranks resumed as 2 ranks unbroken; bit for bit")
    return 0


def state_bytes(ckpt, n):
    """(the largest rank's, the whole) bytes of optimizer state of a ZeRO-1
    run on n ranks of the checkpoint's model: every state buffer (adam.m,
    adam.v, sgd.u, ema) has an element per parameter, frozen ones too, and
    rank k holds elements [total k / n, total (k + 1) / n)."""
    with open(ckpt, "rb") as f:
        header = json.loads(f.read(struct.unpack("<Q", f.read(8))[0]))
    prefixes = ("adam.m.", "adam.v.", "sgd.u.", "ema.")
    total, buffers = 0, set()
    for name, tensor in header.items():
        if name == "__metadata__":
            continue
        prefix = next((p for p in prefixes if name.startswith(p)), None)
        if prefix:
            buffers.add(prefix)
        else:
            numel = 1
            for d in tensor["shape"]:
                numel *= d
            total += numel
    largest = max(total * (k + 1) // n - total * k // n for k in range(n))
    return 4 * len(buffers) * largest, 4 * len(buffers) * total


def zero(t, n):
    extra = ["--steps", "6", "--seed", "3"]
    t.one("one", extra + ["--accumulate", str(n)])
    out = t.ranks(n, "ranks", extra + ["--zero", "1"]).stdout
    if f"data-parallel on {n} ranks" not in out or "trained 6 steps" not in out:
        sys.exit(f"unexpected output of the ranks:\n{out}")
    rows = same("one", "ranks", t)
    line = re.search(r"zero-1: optimizer state per rank ([0-9.]+) MiB of ([0-9.]+) MiB "
                     r"\((\d+) of (\d+) bytes, the largest of (\d+) slices\)", out)
    if not line or out.count("zero-1:") != 1:
        sys.exit(f"rank 0 did not print the state each rank holds once:\n{out}")
    rank, whole = state_bytes(t.path("one.ckpt"), n)
    got = (int(line[3]), int(line[4]), int(line[5]))
    if got != (rank, whole, n) or line[1] != f"{rank / 2**20:.2f}" or \
            line[2] != f"{whole / 2**20:.2f}":
        sys.exit(f"the state per rank is reported as {line[0]}; the model's parameters and "
                 f"optimizer give {rank} of {whole} bytes on {n} ranks")
    # And the replicated run says nothing of it.
    if "zero-1:" in t.ranks(n, "replicated", extra).stdout:
        sys.exit("a run without --zero reports a ZeRO-1 state")
    print(f"ok: {n} ranks with --zero 1 log --accumulate {n}'s {rows - 1} rows and write its "
          f"checkpoint bit for bit; each holds at most {rank} of {whole} bytes of state")
    return 0


def param_count(ckpt):
    """The parameters (elements) of the checkpoint's model: its tensors but
    the optimizer state's."""
    with open(ckpt, "rb") as f:
        header = json.loads(f.read(struct.unpack("<Q", f.read(8))[0]))
    total = 0
    for name, tensor in header.items():
        if name == "__metadata__" or name.startswith(("adam.m.", "adam.v.", "sgd.u.", "ema.")):
            continue
        numel = 1
        for d in tensor["shape"]:
            numel *= d
        total += numel
    return total


def zero2(t, n):
    extra = ["--steps", "6", "--seed", "3"]
    t.one("one", extra + ["--accumulate", str(n)])
    out = t.ranks(n, "ranks", extra + ["--zero", "2"]).stdout
    if f"data-parallel on {n} ranks" not in out or "trained 6 steps" not in out:
        sys.exit(f"unexpected output of the ranks:\n{out}")
    rows = same("one", "ranks", t)
    state = re.search(r"zero-2: optimizer state per rank ([0-9.]+) MiB of ([0-9.]+) MiB "
                      r"\((\d+) of (\d+) bytes, the largest of (\d+) slices\)", out)
    grads = re.search(r"zero-2: gradients per rank after the sum ([0-9.]+) MiB of ([0-9.]+) MiB "
                      r"\((\d+) of (\d+) bytes, the largest of (\d+) slices; replicated ranks "
                      r"hold the whole\)", out)
    if not state or not grads or out.count("zero-2:") != 2 or "zero-1:" in out:
        sys.exit(f"rank 0 did not print the state and the gradients each rank holds once:\n{out}")
    rank, whole = state_bytes(t.path("one.ckpt"), n)
    if (int(state[3]), int(state[4]), int(state[5])) != (rank, whole, n):
        sys.exit(f"the state per rank is reported as {state[0]}; the model's parameters and "
                 f"optimizer give {rank} of {whole} bytes on {n} ranks")
    total = param_count(t.path("one.ckpt"))
    slice_bytes = 4 * max(total * (k + 1) // n - total * k // n for k in range(n))
    if (int(grads[3]), int(grads[4]), int(grads[5])) != (slice_bytes, 4 * total, n) or \
            grads[1] != f"{slice_bytes / 2**20:.2f}" or grads[2] != f"{4 * total / 2**20:.2f}":
        sys.exit(f"the gradients per rank are reported as {grads[0]}; the model's {total} "
                 f"parameters give {slice_bytes} of {4 * total} bytes on {n} ranks")
    t.ranks(n, "again", extra + ["--zero", "2"])
    same("ranks", "again", t)
    print(f"ok: {n} ranks with --zero 2 log --accumulate {n}'s {rows - 1} rows and write its "
          f"checkpoint bit for bit; each holds at most {rank} of {whole} bytes of state and "
          f"{slice_bytes} of {4 * total} bytes of gradients; a second run is identical")
    return 0


def zero_resume(t, _):
    extra = ["--steps", "8", "--seed", "5"]
    t.one("one", extra + ["--accumulate", "2", "--stop-after", "3"])
    t.one("one", extra + ["--accumulate", "3", "--resume", t.path("one.ckpt")])
    z1, z2 = ["--zero", "1"], ["--zero", "2"]
    cases = [("zz", z1, z1), ("zr", z1, []), ("rz", [], z1), ("z2z2", z2, z2), ("z2r", z2, []),
             ("rz2", [], z2), ("zz2", z1, z2), ("z2z", z2, z1)]
    for name, before, after in cases:
        t.ranks(2, name, extra + before + ["--stop-after", "3"])
        t.ranks(3, name, extra + after + ["--resume", t.path(name + ".ckpt")])
        same("one", name, t)
    # The same N: ZeRO-1 ranks stopped and resumed equal them unbroken.
    zero1 = ["--zero", "1"]
    t.ranks(2, "unbroken", extra + zero1)
    t.ranks(2, "broken", extra + zero1 + ["--stop-after", "5"])
    t.ranks(2, "broken", extra + zero1 + ["--resume", t.path("broken.ckpt")])
    same("unbroken", "broken", t, train_only=True)
    t.ranks(2, "unbroken2", extra + z2)
    t.ranks(2, "broken2", extra + z2 + ["--stop-after", "5"])
    t.ranks(2, "broken2", extra + z2 + ["--resume", t.path("broken2.ckpt")])
    same("unbroken2", "broken2", t, train_only=True)
    print("ok: resumed on 3 ranks after 2 as one process with --accumulate 2 then 3, ZeRO-1 "
          "or ZeRO-2 before, after or both (and one stage then the other); 2 ZeRO-1 and 2 "
          "ZeRO-2 ranks resumed as 2 unbroken; bit for bit")
    return 0


def rank_pid(tag, rank):
    """The pid of the process of `rank` whose environment carries `tag`."""
    want = {f"STRINGC_DP_TEST={tag}".encode(), f"OMPI_COMM_WORLD_RANK={rank}".encode()}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = set(f.read().split(b"\0"))
            with open(f"/proc/{pid}/comm") as f:
                comm = f.read().strip()
        except OSError:
            continue
        if comm == "stringrun" and want <= env:
            return int(pid)
    return None


def fault(t, sig, extra, bound):
    tag = f"{t.work}:{time.time()}"
    ckpt = t.path("ranks.ckpt")
    # Epochs of 2 steps, so checkpoints follow each other; far more steps
    # than the test waits for.
    p = subprocess.Popen(t.mpi_cmd(3, "ranks", ["--steps", "1000000", "--no-eval"] + extra),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=mpi_env(tag))
    try:
        deadline = time.time() + 60
        while not os.path.exists(ckpt) and time.time() < deadline and p.poll() is None:
            time.sleep(0.05)
        pid = rank_pid(tag, 1)
        if not os.path.exists(ckpt) or pid is None:
            p.kill()
            out, err = p.communicate()
            sys.exit(f"no checkpoint or no rank 1 to stop:\n{out}\n{err}")
        time.sleep(0.3)  # mid-run
        return stop_rank_one(p, pid, sig, bound)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def stop_rank_one(p, pid, sig, bound):
    """Sends `sig` to rank 1 (process `pid`) of the running mpirun `p` and
    waits at most `bound` seconds for the run to end: its output and the
    seconds it took. Fails the test when the ranks did not stop, or when
    mpirun exited 0."""
    os.kill(pid, sig)
    start = time.time()
    try:
        out, err = p.communicate(timeout=bound)
    except subprocess.TimeoutExpired:
        os.kill(pid, signal.SIGKILL)
        p.kill()
        p.communicate()
        sys.exit(f"the ranks did not stop within {bound} s of rank 1's {sig.name}")
    took = time.time() - start
    if p.returncode == 0:
        sys.exit(f"mpirun exited 0 after rank 1's {sig.name}:\n{out}\n{err}")
    return out + err, took


def loads(t):
    r = run([t.stringrun, "eval", t.pkg, "--data", t.data, "--resume", t.path("ranks.ckpt"),
             "--threads", "1"], check=False)
    if r.returncode != 0:
        sys.exit(f"the last checkpoint does not load:\n{r.stderr}")
    return r.stdout.strip()


def killed(t, _):
    text, took = fault(t, signal.SIGKILL, [], 60)
    if "rank 1" not in text:
        sys.exit(f"the error does not name rank 1:\n{text}")
    print(f"ok: rank 1 killed: the run stopped in {took:.1f} s (bound 60 s), non-zero, naming "
          f"rank 1; {loads(t)}")
    return 0


def hung(t, _):
    text, took = fault(t, signal.SIGSTOP, ["--rank-timeout", "2"], 40)
    # Rank 0 or 2 names rank 1: it sent nothing, or took nothing (the
    # transport holds a large message until the receiver takes it).
    if not re.search(r"error: rank [02] of 3: (nothing from rank 1 for 2 s|rank 1 took "
                     r"nothing from this rank for 2 s)", text):
        sys.exit(f"no rank named rank 1 as silent:\n{text}")
    print(f"ok: rank 1 stopped: the others stopped in {took:.1f} s (timeout 2 s), non-zero, "
          f"naming rank 1; {loads(t)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
