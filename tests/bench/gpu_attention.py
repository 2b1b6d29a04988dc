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
Two precisions, each side in the same one: float32 (stringc's fp32 FMA
kernels; PyTorch picks its fastest SDPA backend for float32 inputs) and
bfloat16 (stringc's tensor-core kernels of --gpu-precision=bf16, f32
inputs rounded to bf16 as they load, f32 accumulation; PyTorch's SDPA and
RoPE on bf16 tensors, FlashAttention-2 on an sm_80+ GPU).
Exit 3 when PyTorch or a CUDA device is missing (nothing was measured).
"""
import argparse
import re
import subprocess
import sys
import time

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    print("gpu_attention.py: PyTorch is not installed (nothing measured)", file=sys.stderr)
    sys.exit(3)

# (batch, tokens, heads, head dim): the ViT examples (7x7 patches + CLS,
# 4 heads of 16) at the benchmark batches, and ViT-B/16-like 197 x 64.
SHAPES = [(256, 50, 4, 16), (1024, 50, 4, 16), (256, 197, 12, 64), (64, 1024, 8, 64)]


def rope(x, cos, sin):
    x1, x2 = x[..., 0::2], x[..., 1::2]
    return torch.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1).flatten(-2)


def time_torch(b, t, h, dh, iters, backward, dtype):
    q, k, v = (torch.randn(b, h, t, dh, device="cuda", dtype=dtype, requires_grad=backward)
               for _ in range(3))
    angles = torch.arange(t, device="cuda")[:, None] * 100.0 ** (
        -2.0 * torch.arange(dh // 2, device="cuda") / dh)
    cos, sin = torch.cos(angles).to(dtype), torch.sin(angles).to(dtype)
    dy = torch.randn(b, h, t, dh, device="cuda", dtype=dtype)

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
    parser.add_argument("--kernels", required=True,
                        help="tests/cuda/kernels.pe, --gpu-all-kernels --gpu-precision=bf16")
    parser.add_argument("--bench", required=True, help="the stringrt_attention_bench binary")
    parser.add_argument("--iters", type=int, default=50)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("gpu_attention.py: no CUDA device visible to PyTorch (nothing measured)",
              file=sys.stderr)
        sys.exit(3)
    print(f"device: {torch.cuda.get_device_name()}; torch {torch.__version__}")
    print(f"{'':>5} {'B':>5} {'T':>5} {'H':>3} {'Dh':>3}   {'fwd TFLOP/s':>23}   "
          f"{'fwd+bwd TFLOP/s':>23}")
    print(f"{'':>25}   {'stringc':>7} {'torch':>7} {'ratio':>7}   {'stringc':>7} {'torch':>7} "
          f"{'ratio':>7}")
    failed = False
    for precision, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
        for b, t, h, dh in SHAPES:
            flops = 4.0 * b * h * t * t * dh
            fwd_torch = flops / time_torch(b, t, h, dh, args.iters, False, dtype) / 1e12
            both_torch = 3.5 * flops / time_torch(b, t, h, dh, args.iters, True, dtype) / 1e12
            run = subprocess.run([args.bench, args.kernels, str(b), str(t), str(h), str(dh),
                                  str(args.iters), precision], capture_output=True, text=True)
            m = re.search(r"forward [0-9.]+ ms ([0-9.]+) TFLOP/s, forward\+backward [0-9.]+ ms "
                          r"([0-9.]+) TFLOP/s", run.stdout)
            row = f"{precision:>5} {b:>5} {t:>5} {h:>3} {dh:>3}"
            if run.returncode != 0 or not m:
                failed = True
                print(f"{row}   stringc failed: {(run.stderr or run.stdout).strip()}"
                      f" (torch {fwd_torch:.2f} / {both_torch:.2f} TFLOP/s)")
                continue
            fwd, both = float(m.group(1)), float(m.group(2))
            print(f"{row}   {fwd:7.2f} {fwd_torch:7.2f} {fwd / fwd_torch:6.2f}x"
                  f"   {both:7.2f} {both_torch:7.2f} {both / both_torch:6.2f}x")
            sys.stdout.flush()
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
