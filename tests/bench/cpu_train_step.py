#!/usr/bin/env python3
"""Times the ViT training step (forward, backward, AdamW) in stringc and in
eager PyTorch in one run: same model, batch, data and thread count. Prints
images/s for both and the ratio stringc / PyTorch.

Run with Debian's torch: /usr/bin/python3 tests/bench/cpu_train_step.py
  [--model vit_rope|vit_cayley|vit_rope_dropout|vit_generators] [--batch 128] [--steps 20]
  [--threads 2]
  [--bin build/bin]
or, for the encodings' overhead (stringc only, no peer):
  /usr/bin/python3 tests/bench/cpu_train_step.py --encodings [--batch 128] [--steps 10]
    [--threads 2] [--rounds 2] [--only vit_generators,...]
which times every ViT example's step (ENCODINGS) and prints it as a ratio to
vit_rope's step in the same run: vit_rope is timed before each example and
after the last, each example's ratio taken to the mean of the vit_rope runs
on either side of it (alternated A/B, for a machine shared with other work),
and each example's best of --rounds such rounds kept.
The peer gets its best set-up: OpenBLAS (libopenblas0-pthread behind
libblas.so.3, installed by scripts/setup.sh), and the fastest of its thread
settings: torch's intra-op threads from 1 to --threads, each with OpenBLAS's
own pool at 1 thread and at --threads (OPENBLAS_NUM_THREADS must be set before
the library loads, so each setting runs in its own process). With both pools at
full size the two oversubscribe the cores and PyTorch slows down by 2x or more.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_vit  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def model_source(model, work):
    """The .pe file of `model`: an example, or vit_rope_dropout written into `work`."""
    if model != "vit_rope_dropout":
        return os.path.join(ROOT, "examples", model + ".pe")
    path = os.path.join(work, model + ".pe")
    with open(os.path.join(ROOT, "examples", "vit_rope.pe")) as f:
        text = torch_vit.vit_rope_dropout_source(f.read())
    with open(path, "w") as f:
        f.write(text)
    return path


def time_stringc(bin_dir, model, batch, steps, threads):
    work = tempfile.mkdtemp(prefix="stringc-bench-")
    pkg = os.path.join(work, model + ".pkg")
    subprocess.run([os.path.join(bin_dir, "stringc"), model_source(model, work),
                    "--target=cpu", "-o", pkg], check=True)
    env = dict(os.environ, STRINGRT_THREADS=str(threads))
    out = subprocess.run([os.path.join(bin_dir, "stringrun"), "bench", pkg, "--batch", str(batch),
                          "--steps", str(steps)], check=True, capture_output=True, text=True, env=env).stdout
    match = re.search(r"([0-9.]+) images/s", out)
    if not match:
        sys.exit("cannot read images/s from stringrun bench output:\n" + out)
    return float(match.group(1))


# The ViT examples of issue 43's table: every encoding at the cost of RoPE.
ENCODINGS = ["vit_cayley", "vit_sparse_cayley", "vit_string", "vit_polar", "vit_reflection",
             "vit_generators"]


def encoding_overhead(bin_dir, batch, steps, threads, rounds, examples=ENCODINGS):
    """Each example's step (ms) and its ratio to vit_rope's, alternated with vit_rope."""
    def step_ms(model):
        return 1000.0 * batch / time_stringc(bin_dir, model, batch, steps, threads)
    best = {}
    for _ in range(rounds):
        rope = step_ms("vit_rope")
        for model in examples:
            ours = step_ms(model)
            after = step_ms("vit_rope")
            ratio = ours / ((rope + after) / 2)
            if model not in best or ratio < best[model][1]:
                best[model] = (ours, ratio, (rope + after) / 2)
            rope = after
    print(f"encodings vs vit_rope, batch {batch}, {threads} threads, {os.cpu_count()} cores, "
          f"best of {rounds} alternated rounds")
    print(f"  {'example':<18} {'step ms':>9} {'vit_rope ms':>11} {'ratio':>6}")
    for model in examples:
        ours, ratio, rope = best[model]
        print(f"  {model:<18} {ours:9.1f} {rope:11.1f} {ratio:5.2f}x")


def time_torch(model, batch, steps, threads):
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    variant = torch_vit.DROPOUT_VARIANT if model == "vit_rope_dropout" else {}
    if model == "vit_generators":
        net = torch_vit.GeneratorViT()
    else:
        net = torch_vit.ViT(cayley=(model == "vit_cayley"), **variant)
    penalty = getattr(net, "penalty", lambda: 0.0)
    opt = torch.optim.AdamW(net.parameters(), **torch_vit.adamw_settings(model))
    images = torch.rand(batch, 1, 28, 28)
    labels = torch.randint(0, 10, (batch,))
    smoothing = torch_vit.label_smoothing(model)

    def step():
        loss = F.cross_entropy(net(images), labels, label_smoothing=smoothing) + penalty()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
        opt.step()

    for _ in range(2):  # warm-up, as stringrun bench does
        step()
    start = time.perf_counter()
    for _ in range(steps):
        step()
    return batch * steps / (time.perf_counter() - start)


def time_torch_best(model, batch, steps, threads):
    """The fastest peer configuration: (images/s, torch threads, OpenBLAS threads)."""
    best = (0.0, 0, 0)
    for torch_threads in range(1, threads + 1):
        for blas_threads in sorted({1, threads}):
            env = dict(os.environ, OPENBLAS_NUM_THREADS=str(blas_threads))
            code = ("import sys; sys.path.insert(0, %r); import cpu_train_step as b; "
                    "print(b.time_torch(%r, %d, %d, %d))"
                    % (os.path.dirname(os.path.abspath(__file__)), model, batch, steps, torch_threads))
            out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                                 text=True, env=env).stdout
            best = max(best, (float(out.split()[-1]), torch_threads, blas_threads))
    return best


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="vit_rope",
                        choices=["vit_rope", "vit_cayley", "vit_rope_dropout", "vit_generators"])
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    parser.add_argument("--encodings", action="store_true",
                        help="time every ViT example against vit_rope (stringc only)")
    parser.add_argument("--rounds", type=int, default=2, help="--encodings: alternated rounds")
    parser.add_argument("--only", default=",".join(ENCODINGS),
                        help="--encodings: the examples to time, comma-separated (default: all)")
    args = parser.parse_args()
    if args.encodings:
        examples = [name for name in args.only.split(",") if name]
        unknown = [name for name in examples if name not in ENCODINGS]
        if unknown or not examples:
            parser.error(f"--only takes names from {','.join(ENCODINGS)}; got {args.only!r}")
        encoding_overhead(args.bin, args.batch, args.steps, args.threads, args.rounds, examples)
        return

    ours = time_stringc(args.bin, args.model, args.batch, args.steps, args.threads)
    peer, torch_threads, blas_threads = time_torch_best(args.model, args.batch, args.steps, args.threads)
    print(f"{args.model} train step, batch {args.batch}, {args.threads} threads, {os.cpu_count()} cores")
    print(f"  stringc  {ours:10.1f} images/s")
    print(f"  pytorch  {peer:10.1f} images/s   (torch {torch.__version__}, eager; best setting: "
          f"{torch_threads} torch threads, {blas_threads} OpenBLAS threads)")
    print(f"  ratio stringc/pytorch = {ours / peer:.2f}x")


if __name__ == "__main__":
    main()
