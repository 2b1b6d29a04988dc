#!/usr/bin/env python3
"""Data-parallel training on GPU ranks under mpirun, on the CUDA emulator
with the NCCL stand-in (docs/distributed.md, "GPUs").

test_gpu_ranks.py STRINGRUN PKG WORKDIR MODE [N [A]]

PKG is a package of target cuda (examples/vit_rope.pe; with dropout, so
that each rank's masks must be its rows' of the whole batch); the emulator's
environment (STRINGRT_CUDA_DRIVER, STRINGRT_CUBLAS, STRINGRT_CUBLASLT,
STRINGRT_EMULATED_KERNELS) and STRINGRT_NCCL come from CTest.

MODE
  equal N   `mpirun -np N stringrun train --device cuda` logs the losses,
            learning rates and gradient norms of one process with
            `--accumulate N` on the device, and writes its parameters, within
            float rounding (TOLERANCE below); a second run of the ranks is
            identical, bit for bit (logs and checkpoint).
  equal N A N ranks each with `--accumulate A` (its share in A micro-batches,
            one all-reduce a step) against one process with `--accumulate
            N*A`, as above; and a batch too small for N x A micro-batches is
            refused.
  resume [A] 2 ranks (each with --accumulate A, default 1) stopped
            (--stop-after 2) and resumed on 2 ranks log and write what 2
            ranks unbroken do, bit for bit; their checkpoint resumed as one
            process with --accumulate 2*A does too, within TOLERANCE.
  zero N [A] N ranks (each with --accumulate A, default 1) with `--zero 1`
            (ZeRO-1: each GPU holds the moments of its slice of the flat
            buffers; the gradients reduce-scattered, the parameters
            all-gathered) log and write what the replicated ranks do (the
            optimizer state in the checkpoint too), within TOLERANCE, and
            what one process with --accumulate N*A does; a second run is the
            first bit for bit; rank 0's `zero-1:` line gives the bytes the
            device layout's slices make (from the checkpoint's state
            buffers); `--zero 1` as one process is refused. A bf16 package
            (a bf16 copy of the parameters) shards the f32 master weights
            and the EMA too: the start line says so, the EMA counts as a
            slice, and a second zero-1: line gives the bytes of master
            weights per rank (the slice, the parameters the kernels read in
            f32 packed whole and their all-gather's room, from the package's
            value_dtypes); with an EMA, the runs evaluate (the weights and
            the EMA) on a small data set written here, and the evaluations
            match too.
  zero_resume  2 ZeRO-1 ranks stopped (--stop-after 2) and resumed with
            --zero 1 = 2 ZeRO-1 ranks unbroken, bit for bit; their
            checkpoint resumed on 2 replicated ranks and as one process with
            --accumulate 2, and the replicated ranks' resumed with --zero 1,
            end as the unbroken runs do, within TOLERANCE; resumed on 3
            ZeRO-1 ranks, as on 3 replicated ranks.
  killed    rank 1 of 2 killed with SIGKILL mid-run: the run stops within a
            bounded time, non-zero, naming rank 1.
  hung      rank 1 of 2 stopped with SIGSTOP: rank 0 names it after the NCCL
            stand-in's timeout and the run stops, non-zero.
  overlap_zero N [A]  overlap with --zero 1: the overlapped buckets cut at
            the slices' boundaries and each summed on its owner (ncclReduce,
            every rank a root) against one ncclReduceScatter after the
            backward, bit for bit.
  overlap N [A]  N ranks (each with --accumulate A, default 1) with the
            all-reduce overlapping the backward (the default; --bucket-kib 4,
            so that the small model has several buckets) log and write what
            they do with --no-overlap-allreduce, bit for bit; the emulator's
            trace (STRINGRT_CUDA_EMULATOR_TRACE) of every rank shows, in
            each training step queued or captured, the gradients' first
            bucket issued on a stream of its own before the backward's last
            kernel or GEMM, after the loss of every micro-batch (the overlap
            is the last micro-batch's), and the same floats summed; without
            the overlap, everything summed on the step's stream after the
            backward.

Exits 77 (CTest's skip) where mpirun is missing, stringrun has no MPI or no
CUDA backend, or STRINGRT_NCCL is not set.
"""
import csv
import json
import os
import random
import shutil
import signal
import struct
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_ranks import mpi_env, rank_pid, run, stop_rank_one  # noqa: E402

SKIP = 77
TRAIN = ["--device", "cuda", "--batch", "8", "--threads", "1", "--no-eval", "--seed", "3"]
# N ranks sum w_r g_r (w_r = share / batch) in rank order, as --accumulate N
# adds its micro-batches' w_r g_r into a zeroed buffer in micro-batch order:
# on the emulator the same float operations (its saxpy rounds w g, then the
# sum). On a GPU, cuBLAS's saxpy fuses w g + y (one rounding) and NCCL sums
# in its ring's order, so the bits differ by a rounding or so per step; the
# tolerance below is what the test allows, far under what a wrong weight or
# a missing share would change (a factor of N).
TOLERANCE = 1e-5


def main():
    stringrun, pkg, work, mode = sys.argv[1:5]
    ranks = int(sys.argv[5]) if len(sys.argv) > 5 else 2
    parts = int(sys.argv[6]) if len(sys.argv) > 6 else 1
    mpirun = shutil.which("mpirun")
    if mpirun is None:
        print("skipped: no mpirun (install openmpi-bin)")
        return SKIP
    if not os.environ.get("STRINGRT_NCCL"):
        print("skipped: STRINGRT_NCCL names no NCCL (the emulator's stand-in needs MPI)")
        return SKIP
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    t = Tools(mpirun, stringrun, pkg, work)
    probe = t.ranks(2, "probe", ["--steps", "1"], check=False)
    for why in ("built without MPI", "built without the CUDA backend"):
        if why in probe.stderr:
            print(f"skipped: stringrun was {why}")
            return SKIP
    if probe.returncode != 0:
        sys.exit(f"mpirun -np 2 stringrun train --device cuda failed:\n{probe.stdout}\n"
                 f"{probe.stderr}")
    if mode == "resume":  # (always 2 ranks: its number is A)
        return resume(t, int(sys.argv[5]) if len(sys.argv) > 5 else 1)
    return {"equal": equal, "killed": killed, "hung": hung, "overlap": overlap,
            "zero": zero, "zero_resume": zero_resume,
            "overlap_zero": lambda t, n, p: overlap(t, n, p, zero=True)}[mode](t, ranks, parts)


class Tools:
    def __init__(self, mpirun, stringrun, pkg, work):
        self.mpirun, self.stringrun, self.pkg, self.work = mpirun, stringrun, pkg, work
        self.train = TRAIN

    def path(self, name):
        return os.path.join(self.work, name)

    def train_args(self, name, extra, train=None):
        return ([self.stringrun, "train", self.pkg, "--log", self.path(name + ".csv"),
                 "--checkpoint", self.path(name + ".ckpt")] + (train or self.train) + extra)

    def mpi_cmd(self, n, name, extra, train=None):
        return ([self.mpirun, "--oversubscribe", "--bind-to", "none", "-np", str(n)]
                + self.train_args(name, extra, train))

    def one(self, name, extra):
        return run(self.train_args(name, extra), timeout=900)

    def ranks(self, n, name, extra, check=True, env=None, train=None):
        return run(self.mpi_cmd(n, name, extra, train), check=check, env=env or mpi_env(),
                   timeout=900)


def train_rows(path, kinds=("train",)):
    """The log's training rows (or those of `kinds`): {column: value},
    without the speed (wall time)."""
    with open(path) as f:
        rows = [r for r in csv.DictReader(f)]
    return [{k: v for k, v in r.items() if not k.endswith("_per_s")}
            for r in rows if r["kind"] in kinds]


def tensors(path):
    """A checkpoint's f32 tensors by name (safetensors)."""
    with open(path, "rb") as f:
        size = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(size))
        data = f.read()
    out = {}
    for name, t in header.items():
        if name == "__metadata__" or t["dtype"] != "F32":
            continue
        begin, end = t["data_offsets"]
        out[name] = struct.unpack(f"<{(end - begin) // 4}f", data[begin:end])
    return out


def close(a, b):
    return abs(a - b) <= TOLERANCE * max(1.0, abs(a), abs(b))


def compare(t, a_name, b_name, steps, what, evals=0):
    """Whether b's log and checkpoint are a's bit for bit, and the worst
    relative difference of a parameter; exits beyond TOLERANCE. `evals`:
    the evaluations of the weights and of their EMA each log must have too
    (compared alike)."""
    kinds = [("train", steps)] + ([("eval", evals), ("eval_ema", evals)] if evals else [])
    a, b = [], []
    for kind, count in kinds:
        x, y = (train_rows(t.path(n + ".csv"), (kind,)) for n in (a_name, b_name))
        if len(x) != count or len(y) != count:
            sys.exit(f"expected {count} {kind} rows, got {len(x)} and {len(y)}")
        a, b = a + x, b + y
    exact = True
    for i, (x, y) in enumerate(zip(a, b)):
        for key in x:
            if x[key] == y[key]:
                continue
            exact = False
            try:
                ok = close(float(x[key]), float(y[key]))
            except ValueError:
                ok = False
            if not ok:
                sys.exit(f"step {i + 1}: {key} is {y[key]} {what[1]}, {x[key]} {what[0]} "
                         f"(tolerance {TOLERANCE})")
    p, q = tensors(t.path(a_name + ".ckpt")), tensors(t.path(b_name + ".ckpt"))
    if p.keys() != q.keys():
        sys.exit("the checkpoints hold different tensors")
    worst = 0.0
    for name in p:
        for x, y in zip(p[name], q[name]):
            if x != y:
                exact = False
                worst = max(worst, abs(x - y) / max(1.0, abs(x)))
    if worst > TOLERANCE:
        sys.exit(f"the parameters {what[1]} differ from those {what[0]} by {worst:.3g} "
                 f"relative (tolerance {TOLERANCE})")
    return exact, worst


def accumulate(parts):
    return ["--accumulate", str(parts)] if parts > 1 else []


def equal(t, n, parts):
    extra = ["--steps", "3"]
    mine = extra + accumulate(parts)
    on_ranks = f"on {n} ranks" + (f" with --accumulate {parts}" if parts > 1 else "")
    t.one("one", extra + ["--accumulate", str(n * parts)])
    out = t.ranks(n, "ranks", mine).stdout
    split = (f"data-parallel on {n} ranks: each takes its share of every batch"
             + (f" in {parts} micro-batches" if parts > 1 else "")
             + f", as --accumulate {n * parts} splits it")
    if split not in out or "trained 3 steps" not in out:
        sys.exit(f"unexpected output of the ranks:\n{out}")
    if out.count("training '") != 1:
        sys.exit(f"more than rank 0 printed:\n{out}")
    exact, worst = compare(t, "one", "ranks", 3,
                           (f"with --accumulate {n * parts}", on_ranks))
    # Deterministic: a second run of the ranks is the first, bit for bit.
    t.ranks(n, "again", mine)
    if train_rows(t.path("ranks.csv")) != train_rows(t.path("again.csv")):
        sys.exit("two runs of the ranks log different values")
    with open(t.path("ranks.ckpt"), "rb") as f, open(t.path("again.ckpt"), "rb") as g:
        if f.read() != g.read():
            sys.exit("two runs of the ranks write different checkpoints")
    if parts > 1:
        # A batch of fewer rows than micro-batches (n * parts) is refused.
        small = n * parts - 1
        train = list(TRAIN)
        train[train.index("--batch") + 1] = str(small)
        p = t.ranks(n, "small", ["--steps", "1"] + accumulate(parts), check=False, train=train)
        want = (f"a batch of {small} examples cannot be shared by {n} ranks in {parts} "
                f"micro-batches each (--accumulate {parts}): give --batch >= {n * parts}")
        if p.returncode == 0 or want not in p.stderr:
            sys.exit(f"--batch {small} {on_ranks} was not refused as expected:\n{p.stdout}\n"
                     f"{p.stderr}")
    print(f"ok: {n} GPU ranks{f' with --accumulate {parts}' if parts > 1 else ''} log "
          f"--accumulate {n * parts}'s losses, learning rates and norms and "
          f"write its parameters ({'bit for bit' if exact else f'within {worst:.2g}'}; "
          f"tolerance {TOLERANCE}); a second run is identical"
          + (f"; --batch {n * parts - 1} refused" if parts > 1 else ""))
    return 0


def resume(t, parts):
    extra = ["--steps", "4"] + accumulate(parts)
    each = f" with --accumulate {parts}" if parts > 1 else ""
    t.ranks(2, "unbroken", extra)
    t.ranks(2, "broken", extra + ["--stop-after", "2"])
    shutil.copy(t.path("broken.ckpt"), t.path("one.ckpt"))
    shutil.copy(t.path("broken.csv"), t.path("one.csv"))
    out = t.ranks(2, "broken", extra + ["--resume", t.path("broken.ckpt")]).stdout
    if "trained 4 steps" not in out:
        sys.exit(f"the resumed ranks did not finish:\n{out}")
    if train_rows(t.path("unbroken.csv")) != train_rows(t.path("broken.csv")):
        sys.exit(f"2 ranks{each} stopped and resumed log other values than 2 ranks unbroken")
    with open(t.path("unbroken.ckpt"), "rb") as f, open(t.path("broken.ckpt"), "rb") as g:
        if f.read() != g.read():
            sys.exit(f"2 ranks{each} stopped and resumed end with another checkpoint than "
                     f"unbroken")
    # The ranks' checkpoint is one process's: it resumes as one.
    t.one("one", ["--steps", "4", "--accumulate", str(2 * parts), "--resume",
                  t.path("one.ckpt")])
    exact, worst = compare(t, "unbroken", "one", 4,
                           (f"on 2 ranks{each}",
                            f"resumed as one process with --accumulate {2 * parts}"))
    print(f"ok: 2 GPU ranks{each} stopped and resumed = 2 ranks unbroken, bit for bit; their "
          f"checkpoint resumed as one process with --accumulate {2 * parts} = them "
          f"({'bit for bit' if exact else f'within {worst:.2g}'})")
    return 0


ZERO = ["--zero", "1"]


def describe(exact, worst):
    return "bit for bit" if exact else f"within {worst:.2g}"


def state_buffers(t, name):
    """The optimizer's state buffers in the checkpoint NAME: how many are
    moments (adam.m., adam.v., sgd.u.: sharded by ZeRO-1) and whether an
    EMA of the weights (ema.: whole on every GPU) is one."""
    names = tensors(t.path(name + ".ckpt")).keys()
    moments = len({k.split(".")[0] + "." + k.split(".")[1] for k in names
                   if k.startswith(("adam.m.", "adam.v.", "sgd.u."))})
    ema = 1 if any(k.startswith("ema.") for k in names) else 0
    return moments, ema


def package(pkg):
    """A package's manifest and cuda section (its safetensors header)."""
    with open(pkg, "rb") as f:
        size = struct.unpack("<Q", f.read(8))[0]
        meta = json.loads(f.read(size))["__metadata__"]
    return json.loads(meta["manifest"]), json.loads(meta["cuda"])


def master_bytes(pkg, n):
    """ZeRO-1 on n GPU ranks: the bytes of f32 master weights each rank
    holds and the whole weights' where the package reads a bf16 copy of its
    parameters (the masters sharded: the slice, the parameters some kernel
    reads in f32 packed whole, each at 64 floats, and the room of their
    all-gather, n parts of the most floats of them in one slice), else None.
    Each buffer at least 256 bytes (an arena's least)."""
    manifest, cuda = package(pkg)
    dtypes = {name: dict((v, d) for v, d in pairs)
              for name, pairs in cuda.get("value_dtypes", {}).items()}
    bf16, f32 = False, set()
    for name in cuda["steps"]:
        for op in manifest["programs"][name]["ops"]:
            if op["op"] == "pe.get_param":
                if dtypes.get(name, {}).get(op["results"][0]) == "BF16":
                    bf16 = True
                else:
                    f32.add(op["attrs"]["param"])
    if not bf16:
        return None
    up = lambda k: -(-k // 64) * 64  # noqa: E731
    layout, total = [], 0
    for p in manifest["params"]:
        size = 1
        for d in p["shape"]:
            size *= d
        layout.append((p["name"], total, size))
        total += up(size)
    floats = max(1, -(-(-(-total // n)) // 64)) * 64
    packed = sum(up(size) for name, _, size in layout if name in f32)
    most = max(sum(max(0, min((r + 1) * floats, at + size) - max(r * floats, at))
                   for name, at, size in layout if name in f32) for r in range(n))
    arena = lambda b: max(b, 256)  # noqa: E731
    return (floats * 4 + arena(packed * 4) + arena(n * up(max(1, most)) * 4),
            max(total, 1) * 4)


def small_data(t):
    """A small image set (24 training and 16 test images of 28 x 28 uint8,
    labels 0-9) as safetensors: one epoch of 3 steps at batch 8, then its
    evaluations."""
    rng = random.Random(45)
    arrays = {"train_images": ("U8", [24, 28, 28]), "train_labels": ("U8", [24]),
              "test_images": ("U8", [16, 28, 28]), "test_labels": ("U8", [16])}
    header, data = {}, b""
    for name, (dtype, shape) in arrays.items():
        count = 1
        for d in shape:
            count *= d
        values = bytes(rng.randrange(10 if name.endswith("labels") else 256)
                       for _ in range(count))
        header[name] = {"dtype": dtype, "shape": shape,
                        "data_offsets": [len(data), len(data) + len(values)]}
        data += values
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    path = t.path("small.safetensors")
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data)
    return path


def zero(t, n, parts):
    extra = ["--steps", "3"] + accumulate(parts)
    each = f" with --accumulate {parts}" if parts > 1 else ""
    masters = master_bytes(t.pkg, n)
    manifest, _ = package(t.pkg)
    evals = 0
    if masters and manifest["optimizer"].get("ema_decay", 0) > 0:
        # The EMA's evaluation puts the EMA of each slice in place (and
        # back): on a small data set, after the one epoch of 3 steps.
        t.train = [a for a in TRAIN if a != "--no-eval"] + ["--data", small_data(t)]
        evals = 1
    t.one("one", ["--steps", "3", "--accumulate", str(n * parts)])
    t.ranks(n, "replicated", extra)
    out = t.ranks(n, "zero", extra + ZERO).stdout
    if "trained 3 steps" not in out or out.count("training '") != 1:
        sys.exit(f"unexpected output of the ZeRO-1 ranks:\n{out}")
    start = "ZeRO-1: overlapped reduce to the slices' owners, all-gather" + (
        " of the bf16 copy, f32 master weights sharded" if masters else ")")
    if start not in out:
        sys.exit(f"the ZeRO-1 ranks do not say '{start}' on their start line:\n{out}")
    lines = [l for l in out.splitlines() if l.startswith("zero-1: f32 master weights per rank ")]
    if masters:
        if len(lines) != 1:
            sys.exit(f"rank 0 printed no zero-1: line of the master weights:\n{out}")
        numbers = lines[0].split("(")[1].split()
        if (int(numbers[0]), int(numbers[2])) != masters:
            sys.exit(f"the master weights' zero-1: line says {numbers[0]} of {numbers[2]} "
                     f"bytes, the package's layout makes {masters[0]} of {masters[1]}:\n"
                     f"{lines[0]}")
    elif lines:
        sys.exit(f"the master weights stay whole, but rank 0 says otherwise:\n{lines[0]}")
    # zero-1: optimizer state per rank X MiB of Y MiB (A of B bytes, the largest of N slices)
    line = next((l for l in out.splitlines() if l.startswith("zero-1: ")), None)
    if line is None:
        sys.exit(f"rank 0 printed no zero-1: line:\n{out}")
    numbers = line.split("(")[1].split()
    held, whole = int(numbers[0]), int(numbers[2])
    # Each buffer in the device layout (its bytes: the line's whole over the
    # buffers); the moments of one slice of it padded to N slices of
    # 256-byte multiples, the EMA whole.
    moments, ema = state_buffers(t, "zero")
    per_buffer = whole // (moments + ema)
    floats = -(-per_buffer // 4 // n)  # a slice, then 64-float (256-byte) multiples
    floats = -(-floats // 64) * 64
    # (with sharded masters the EMA is a slice too)
    want = moments * floats * 4 + ema * (floats * 4 if masters else per_buffer)
    if whole % (moments + ema) or held != want or not line.endswith(f"the largest of {n} slices)"):
        sys.exit(f"the zero-1 line says {held} of {whole} bytes; {moments} moment buffer(s) of "
                 f"{floats} floats and {ema} EMA of {per_buffer} bytes make {want}:\n{line}")
    exact, worst = compare(t, "replicated", "zero", 3,
                           (f"on {n} replicated ranks{each}", f"on {n} ZeRO-1 ranks{each}"),
                           evals)
    exact_one, worst_one = compare(t, "one", "zero", 3,
                                   (f"with --accumulate {n * parts}",
                                    f"on {n} ZeRO-1 ranks{each}"), evals)
    t.ranks(n, "again", extra + ZERO)
    kinds = ("train", "eval", "eval_ema")
    if train_rows(t.path("zero.csv"), kinds) != train_rows(t.path("again.csv"), kinds):
        sys.exit("two runs of the ZeRO-1 ranks log different values")
    with open(t.path("zero.ckpt"), "rb") as f, open(t.path("again.ckpt"), "rb") as g:
        if f.read() != g.read():
            sys.exit("two runs of the ZeRO-1 ranks write different checkpoints")
    p = run(t.train_args("alone", ["--steps", "1"] + ZERO), check=False, timeout=900)
    want_error = ("--zero 1 shards the optimizer state across the ranks of a data-parallel "
                  "run (mpirun -np N stringrun train ...; docs/distributed.md); this is one "
                  "process")
    if p.returncode == 0 or want_error not in p.stderr:
        sys.exit(f"--zero 1 --device cuda as one process was not refused:\n{p.stdout}\n"
                 f"{p.stderr}")
    print(f"ok: {n} ZeRO-1 GPU ranks{each} = {n} replicated ranks ({describe(exact, worst)}) "
          f"= one process with --accumulate {n * parts} ({describe(exact_one, worst_one)}); "
          f"tolerance {TOLERANCE}"
          + (f"; the weights and their EMA evaluated alike" if evals else "")
          + f"; a second run is identical; {held} of {whole} bytes of optimizer state per rank"
          + (f", {masters[0]} of {masters[1]} bytes of master weights" if masters else "")
          + "; one process refused")
    return 0


def zero_resume(t, *_):
    extra = ["--steps", "4"]
    t.ranks(2, "unbroken", extra + ZERO)
    t.ranks(2, "replicated", extra)
    # ZeRO-1 stopped, resumed with ZeRO-1: the same bits.
    t.ranks(2, "broken", extra + ZERO + ["--stop-after", "2"])
    for name in ("to-replicated", "to-one", "to-three", "to-three-replicated"):
        shutil.copy(t.path("broken.ckpt"), t.path(name + ".ckpt"))
        shutil.copy(t.path("broken.csv"), t.path(name + ".csv"))
    out = t.ranks(2, "broken", extra + ZERO + ["--resume", t.path("broken.ckpt")]).stdout
    if "trained 4 steps" not in out:
        sys.exit(f"the resumed ZeRO-1 ranks did not finish:\n{out}")
    if train_rows(t.path("unbroken.csv")) != train_rows(t.path("broken.csv")):
        sys.exit("2 ZeRO-1 ranks stopped and resumed log other values than unbroken")
    with open(t.path("unbroken.ckpt"), "rb") as f, open(t.path("broken.ckpt"), "rb") as g:
        if f.read() != g.read():
            sys.exit("2 ZeRO-1 ranks stopped and resumed end with another checkpoint than "
                     "unbroken")
    # The ZeRO-1 checkpoint resumed without --zero.
    t.ranks(2, "to-replicated", extra + ["--resume", t.path("to-replicated.ckpt")])
    exact_a, worst_a = compare(t, "unbroken", "to-replicated", 4,
                               ("on 2 ZeRO-1 ranks", "resumed from ZeRO-1 on 2 replicated ranks"))
    # And as one process with --accumulate 2.
    t.one("to-one", extra + ["--accumulate", "2", "--resume", t.path("to-one.ckpt")])
    exact_c, worst_c = compare(t, "unbroken", "to-one", 4,
                               ("on 2 ZeRO-1 ranks",
                                "resumed from ZeRO-1 as one process with --accumulate 2"))
    # And on 3 ZeRO-1 ranks (other slices of the same file) as on 3
    # replicated ranks. (Not against the 2 ranks unbroken: 3 shares of the
    # batch round otherwise, in a bf16 package by up to bf16's 2^-9, e.g.
    # its loss gradient 1 / rows.)
    t.ranks(3, "to-three", extra + ZERO + ["--resume", t.path("to-three.ckpt")])
    t.ranks(3, "to-three-replicated", extra + ["--resume", t.path("to-three-replicated.ckpt")])
    exact_d, worst_d = compare(t, "to-three-replicated", "to-three", 4,
                               ("resumed from 2 ZeRO-1 ranks on 3 replicated ranks",
                                "resumed from 2 on 3 ZeRO-1 ranks"))
    # A replicated checkpoint resumed with --zero 1.
    t.ranks(2, "from-replicated", extra + ["--stop-after", "2"])
    t.ranks(2, "from-replicated", extra + ZERO + ["--resume", t.path("from-replicated.ckpt")])
    exact_b, worst_b = compare(t, "replicated", "from-replicated", 4,
                               ("on 2 replicated ranks",
                                "resumed from replicated ranks with ZeRO-1"))
    print(f"ok: 2 ZeRO-1 GPU ranks stopped and resumed = unbroken, bit for bit; their "
          f"checkpoint resumed without --zero = them ({describe(exact_a, worst_a)}), as one "
          f"process with --accumulate 2 too ({describe(exact_c, worst_c)}); on 3 ZeRO-1 "
          f"ranks = on 3 replicated ranks ({describe(exact_d, worst_d)}); a "
          f"replicated checkpoint resumed with --zero 1 = the replicated run "
          f"({describe(exact_b, worst_b)})")
    return 0


def trace_steps(path):
    """The training steps of an emulator trace (DriverTrace.cpp): for each
    step queued or captured (its lines up to the gradient norm's kernel,
    pe_sumsq_partials, which begins the optimizer), the step's stream and
    its lines as (stream, what)."""
    with open(path) as f:
        lines = [line.rstrip("\n").split(" ", 2) for line in f]
    steps, begin = [], 0
    for i, (stream, _, what) in enumerate(lines):
        if what.startswith("kernel pe_sumsq_partials "):
            steps.append((stream, [(s, w) for s, _, w in lines[begin:i]]))
            begin = i + 1
    return steps


def is_backward(what):
    """A kernel or GEMM of the walk (not the gradients' and loss's axpys)."""
    return what.startswith("kernel ") or (what.startswith("cublas")
                                          and not what.startswith("cublasSaxpy"))


SUMS = ("ncclAllReduce (", "ncclReduce (", "ncclReduceScatter (")


def summed(what):
    """The floats of an ncclAllReduce, ncclReduce (ZeRO-1's overlapped
    buckets) or ncclReduceScatter (ZeRO-1 after the backward) line, else
    None."""
    for name in SUMS:
        if what.startswith(name):
            return int(what[len(name):].split(" ")[0])
    return None


def reduce_root(what):
    """The root of an ncclReduce line ("ncclReduce (N floats to rank R)"), else None."""
    if not what.startswith("ncclReduce ("):
        return None
    return int(what.rstrip(")").split(" ")[-1])


def check_trace(prefix, ranks, parts, overlapped, zero=False):
    """Every rank's trace (PREFIX.<pid>) as `overlap` describes; returns the
    floats each step sums and the largest number of backward launches left
    after the first gradient bucket's all-reduce. With ZeRO-1 the
    overlapped buckets are ncclReduce calls whose roots are every rank, and
    after the backward one ncclReduceScatter."""
    directory, base = os.path.split(prefix)
    files = sorted(os.path.join(directory, f) for f in os.listdir(directory)
                   if f.startswith(base + "."))
    if len(files) != ranks:
        sys.exit(f"{len(files)} traces of {ranks} ranks under {prefix}")
    totals, most_left = set(), 0
    for path in files:
        seen = 0
        for stream, lines in trace_steps(path):
            sums = [(i, s, summed(w)) for i, (s, w) in enumerate(lines) if summed(w) is not None]
            if not sums:  # no all-reduce: not a step of this run's training
                continue
            seen += 1
            totals.add(sum(n for _, _, n in sums))
            first = next(i for i, _, n in sums if n > 1)  # the first gradient bucket
            left = sum(1 for s, w in lines[first:] if s == stream and is_backward(w))
            losses = sum(1 for s, w in lines[:first] if s == stream and w == "cublasSaxpy (n 1)")
            streams = {s for _, s, _ in sums}
            where = f"{path}, step {seen}"
            if overlapped:
                if streams == {stream} or len(streams) != 1:
                    sys.exit(f"{where}: the all-reduce ran on streams {streams}, the step on "
                             f"{stream}: not one stream of its own")
                if left == 0:
                    sys.exit(f"{where}: the first gradient bucket was issued after the "
                             f"backward's last launch: no overlap")
                if losses != parts:
                    sys.exit(f"{where}: the first gradient bucket was issued after {losses} "
                             f"micro-batches' losses, not all {parts}: before the last "
                             f"micro-batch")
                if len([n for _, _, n in sums if n > 1]) < 2:
                    sys.exit(f"{where}: fewer than 2 gradient buckets (--bucket-kib 4)")
                roots = {reduce_root(w) for _, w in lines} - {None}
                kinds = {w.split(" (")[0] for s, w in lines if summed(w) is not None}
                want = {"ncclAllReduce", "ncclReduce"} if zero else {"ncclAllReduce"}
                if kinds != want or (zero and roots != set(range(ranks))):
                    sys.exit(f"{where}: the overlapped sums are {sorted(kinds)} to the roots "
                             f"{sorted(roots)}, not {sorted(want)}"
                             + (f" to every rank's slice" if zero else ""))
            else:
                if zero and not any(w.startswith("ncclReduceScatter (") for _, w in lines):
                    sys.exit(f"{where}: no ncclReduceScatter after the backward")
                if streams != {stream} or left != 0:
                    sys.exit(f"{where}: without the overlap the all-reduce ran on {streams} "
                             f"with {left} backward launches after it (step stream {stream})")
            most_left = max(most_left, left)
        if seen < 2:
            sys.exit(f"{path}: {seen} training steps with an all-reduce, expected the queued "
                     f"and the captured one")
    if len(totals) != 1:
        sys.exit(f"the steps sum different numbers of floats: {sorted(totals)}")
    return totals.pop(), most_left


def overlap(t, n, parts, zero=False):
    extra = ["--steps", "3", "--bucket-kib", "4"] + accumulate(parts) + (ZERO if zero else [])
    each = (f" with --accumulate {parts}" if parts > 1 else "") + (" and --zero 1" if zero else "")
    results = {}
    for name, flags, overlapped in (("overlapped", [], True),
                                    ("sequential", ["--no-overlap-allreduce"], False)):
        traces = t.path(name + "-trace")
        os.makedirs(traces)
        env = mpi_env()
        env["STRINGRT_CUDA_EMULATOR_TRACE"] = os.path.join(traces, "rank")
        t.ranks(n, name, extra + flags, env=env)
        results[name] = check_trace(os.path.join(traces, "rank"), n, parts, overlapped, zero)
    if train_rows(t.path("overlapped.csv")) != train_rows(t.path("sequential.csv")):
        sys.exit(f"{n} ranks{each} log other values with the all-reduce overlapped than without")
    with open(t.path("overlapped.ckpt"), "rb") as f, open(t.path("sequential.ckpt"), "rb") as g:
        if f.read() != g.read():
            sys.exit(f"{n} ranks{each} write another checkpoint with the all-reduce overlapped "
                     f"than without")
    (floats, left), (floats_seq, _) = results["overlapped"], results["sequential"]
    # (ZeRO-1: the buckets cover the buffer, the reduce-scatter's count is a slice)
    if floats != floats_seq and not zero:
        sys.exit(f"the overlapped steps sum {floats} floats, the sequential {floats_seq}")
    print(f"ok: {n} GPU ranks{each}: the "
          + ("sums to the slices' owners" if zero else "all-reduce")
          + f" overlapped (its first gradient bucket issued on its own stream with up to {left} "
          f"backward launches still to come) = after the backward, bit for bit ({floats} "
          f"floats summed a step)")
    return 0


def fault(t, sig, bound, env_extra):
    tag = f"{t.work}:{time.time()}"
    env = mpi_env(tag)
    env.update(env_extra)
    p = subprocess.Popen(t.mpi_cmd(2, "ranks", ["--steps", "1000000"]),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    log = t.path("ranks.csv")
    try:
        # Mid-run: after a logged step.
        deadline = time.time() + 300
        while time.time() < deadline and p.poll() is None:
            if os.path.exists(log):
                with open(log) as f:
                    if len(f.readlines()) >= 3:
                        break
            time.sleep(0.1)
        pid = rank_pid(tag, 1)
        if p.poll() is not None or pid is None:
            p.kill()
            out, err = p.communicate()
            sys.exit(f"the run did not get going, or no rank 1 to stop:\n{out}\n{err}")
        return stop_rank_one(p, pid, sig, bound)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def killed(t, *_):
    text, took = fault(t, signal.SIGKILL, 60, {})
    if "rank 1" not in text:
        sys.exit(f"the error does not name rank 1:\n{text}")
    print(f"ok: rank 1 killed: the run stopped in {took:.1f} s (bound 60 s), non-zero, naming "
          f"rank 1")
    return 0


def hung(t, *_):
    text, took = fault(t, signal.SIGSTOP, 60, {"STRINGRT_NCCL_EMULATOR_TIMEOUT": "2"})
    if "error: rank 0 of 2: NCCL failed during training step" not in text or \
            "nothing from rank 1 for 2 s" not in text:
        sys.exit(f"rank 0 did not name rank 1 as silent:\n{text}")
    print(f"ok: rank 1 stopped: rank 0 named it and the run stopped in {took:.1f} s (the "
          f"stand-in's timeout 2 s), non-zero")
    return 0


if __name__ == "__main__":
    sys.exit(main())
