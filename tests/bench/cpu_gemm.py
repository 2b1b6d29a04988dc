#!/usr/bin/env python3
"""The linear layers' GEMMs on the CPU: stringrt against PyTorch's matmul.

A ViT training step on the CPU spends about half its time in three products
per dense layer, x [rows, in] and w [in, out]: the forward x w, the input
gradient dy w^T and the weight gradient x^T dy (rows = batch x tokens, long;
in and out the model's widths, short). This times the runtime's `cpu::gemm`
(`stringrt_cpu_gemm_bench`: the row-tile and outer-product kernels where they
apply, else OpenBLAS on the pool) and, as the peer at its best, `torch.matmul`
into a kept output (`out=`, torch's own threads, the same thread count) on
the same shapes, warm (the same product again) and cold (a 64 MiB buffer
walked between rounds: a weight gradient reads an activation the forward
pass wrote long before). Prints the best of the rounds in ms, the ratio
(PyTorch's time over stringrt's: above 1, stringrt is faster) and, for the
shapes of `examples/vit_rope.pe` at batch 128 (rows 6400; per block four
64 x 64 layers, one 64 x 128, one 128 x 64), the three products of the encoder
blocks' dense layers (72 in all) weighted by their counts.

    /usr/bin/python3 tests/bench/cpu_gemm.py [--bench build/bin/stringrt_cpu_gemm_bench]
        [--rows 6400] [--threads 2] [--rounds 20]
"""
import argparse
import subprocess
import sys
import time

PRODUCTS = ["forward", "grad_input", "grad_weight"]
# (in, out) of vit_rope's dense layers and how many of each a step has
# (4 blocks: wq, wk, wv, wo; w1; w2).
LAYERS = [((64, 64), 16), ((64, 128), 4), ((128, 64), 4)]


def stringrt_ms(bench, product, rows, shape, threads, rounds):
    out = subprocess.run([bench, product, str(rows), str(shape[0]), str(shape[1]), str(threads),
                          str(rounds)], check=True, capture_output=True, text=True).stdout
    return {k: float(v) for k, v in (line.split() for line in out.splitlines())}


def torch_ms(product, rows, shape, threads, rounds):
    import torch
    torch.set_num_threads(threads)
    gen = torch.Generator().manual_seed(0)
    n_in, n_out = shape
    x = torch.rand(rows, n_in, generator=gen) * 2 - 1
    w = torch.rand(n_in, n_out, generator=gen) * 2 - 1
    dy = torch.rand(rows, n_out, generator=gen) * 2 - 1
    if product == "forward":
        a, b, out = x, w, torch.empty(rows, n_out)
    elif product == "grad_input":
        a, b, out = dy, w.t(), torch.empty(rows, n_in)
    else:
        a, b, out = x.t(), dy, torch.empty(n_in, n_out)
    flush = torch.ones(16 << 20)  # 64 MiB
    torch.matmul(a, b, out=out)
    times = {}
    for kind in ("warm", "cold"):
        best = float("inf")
        for _ in range(rounds):
            if kind == "cold":
                flush.add_(1.0)
            start = time.perf_counter()
            torch.matmul(a, b, out=out)
            best = min(best, (time.perf_counter() - start) * 1e3)
        times[kind] = best
    return times


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bench", default="build/bin/stringrt_cpu_gemm_bench")
    p.add_argument("--rows", type=int, default=6400)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rounds", type=int, default=20)
    a = p.parse_args()
    if a.rows <= 0 or a.threads <= 0 or a.rounds <= 0:
        sys.exit("--rows, --threads and --rounds must be positive")
    try:
        import torch  # noqa: F401
    except ImportError:
        sys.exit("PyTorch is not importable here: run this with /usr/bin/python3 (Debian's torch)")
    print(f"linear-layer GEMMs, rows {a.rows}, {a.threads} threads, best of {a.rounds} (ms; "
          f"ratio = torch / stringrt)")
    print(f"{'product':>12} {'in x out':>9} {'':>5} {'torch':>8} {'stringrt':>9} {'ratio':>6}"
          f" {'stringrt GFLOP/s':>17}")
    step = {kind: {"torch": 0.0, "stringrt": 0.0} for kind in ("warm", "cold")}
    for product in PRODUCTS:
        for shape, count in LAYERS:
            ours = stringrt_ms(a.bench, product, a.rows, shape, a.threads, a.rounds)
            theirs = torch_ms(product, a.rows, shape, a.threads, a.rounds)
            flops = 2.0 * a.rows * shape[0] * shape[1]
            for kind in ("warm", "cold"):
                step[kind]["torch"] += count * theirs[kind]
                step[kind]["stringrt"] += count * ours[kind]
                print(f"{product:>12} {shape[0]:>4}x{shape[1]:<4} {kind:>5} {theirs[kind]:8.3f}"
                      f" {ours[kind]:9.3f} {theirs[kind] / ours[kind]:6.2f}"
                      f" {flops / ours[kind] / 1e6:17.1f}")
    for kind in ("warm", "cold"):
        t, s = step[kind]["torch"], step[kind]["stringrt"]
        print(f"vit_rope's step, all three products, {kind}: torch {t:.2f} ms, stringrt {s:.2f} ms,"
              f" ratio {t / s:.2f}")


if __name__ == "__main__":
    main()
