#!/usr/bin/env python3
"""The fused RoPE attention kernel alone on one NVIDIA GPU: stringc's
generated kernels (runtime/tests/bench/AttentionBench.cpp) against PyTorch's
F.scaled_dot_product_attention plus a separate RoPE on q and k, forward and
forward + backward, at ViT shapes; TFLOP/s of both and the ratio (issue 5).

On the GPU machine (PyTorch there; the kernel package from the MLIR machine,
scripts/gpu_packages.sh):
    python3 tests/bench/gpu_attention.py --kernels gpu/kernels.pkg \
        --bench build-gpu-runtime/tests/stringrt_attention_bench
FLOPs as FlashAttention counts them: forward 4 B H T^2 Dh, backward 2.5x.
Both sides float32 (the kernels use fp32 FMA; PyTorch picks its fastest
SDPA backend for float32 inputs).
"""
import argparse
import re
import subprocess
import sys
import time

import torch
import torch.nn.functional as F

# (batch, tokens, heads, head dim): the ViT examples (7x7 patches + CLS,
# 4 heads of 16) at the benchmark batches, and ViT-B/16-like 197 x 64.
SHAPES = [(256, 50, 4, 16), (1024, 50, 4, 16), (256, 197, 12, 64), (64, 1024, 8, 64)]


def rope(x, cos, sin):
    x1, x2 = x[..., 0::2], x[..., 1::2]
    return torch.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1).flatten(-2)


def time_torch(b, t, h, dh, iters, backward):
    q, k, v = (torch.randn(b, h, t, dh, device="cuda", requires_grad=backward) for _ in range(3))
    angles = torch.arange(t, device="cuda")[:, None] * 100.0 ** (
        -2.0 * torch.arange(dh // 2, device="cuda") / dh)
    cos, sin = torch.cos(angles), torch.sin(angles)
    dy = torch.randn(b, h, t, dh, device="cuda")

    def step():
        y = F.scaled_dot_product_attention(rope(q, cos, sin), rope(k, cos, sin), v)
        if backward:
            y.backward(dy)
    for _ in range(3):
        step()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(iters):
        step()
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / iters


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernels", required=True, help="tests/cuda/kernels.pe, --gpu-all-kernels")
    parser.add_argument("--bench", required=True, help="the stringrt_attention_bench binary")
    parser.add_argument("--iters", type=int, default=50)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit("no CUDA device visible to PyTorch")
    print(f"device: {torch.cuda.get_device_name()}; torch {torch.__version__}; float32")
    print(f"{'B':>5} {'T':>5} {'H':>3} {'Dh':>3}   {'fwd TFLOP/s':>23}   {'fwd+bwd TFLOP/s':>23}")
    print(f"{'':>19}   {'stringc':>7} {'torch':>7} {'ratio':>7}   {'stringc':>7} {'torch':>7} {'ratio':>7}")
    for b, t, h, dh in SHAPES:
        flops = 4.0 * b * h * t * t * dh
        fwd_torch = flops / time_torch(b, t, h, dh, args.iters, False) / 1e12
        both_torch = 3.5 * flops / time_torch(b, t, h, dh, args.iters, True) / 1e12
        run = subprocess.run([args.bench, args.kernels, str(b), str(t), str(h), str(dh),
                              str(args.iters)], capture_output=True, text=True)
        m = re.search(r"forward [0-9.]+ ms ([0-9.]+) TFLOP/s, forward\+backward [0-9.]+ ms "
                      r"([0-9.]+) TFLOP/s", run.stdout)
        if run.returncode != 0 or not m:
            print(f"{b:>5} {t:>5} {h:>3} {dh:>3}   stringc failed: {(run.stderr or run.stdout).strip()}"
                  f" (torch {fwd_torch:.2f} / {both_torch:.2f} TFLOP/s)")
            continue
        fwd, both = float(m.group(1)), float(m.group(2))
        print(f"{b:>5} {t:>5} {h:>3} {dh:>3}   {fwd:7.2f} {fwd_torch:7.2f} {fwd / fwd_torch:6.2f}x"
              f"   {both:7.2f} {both_torch:7.2f} {both / both_torch:6.2f}x")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
