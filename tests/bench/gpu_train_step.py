#!/usr/bin/env python3
"""Times the full ViT training step (forward, backward, AdamW) on one NVIDIA
GPU in stringc and in PyTorch (eager and torch.compile) in one run: same
model, batch, data shape and precision. Prints images/s and the ratios
stringc / eager and stringc / torch.compile (issue 5: the goal is 1.5x
torch.compile).

It runs on the GPU machine, which has PyTorch and the runtime but no MLIR:
compile the packages here first (scripts/gpu_verify.sh does both sides):
    build/bin/stringc examples/vit_rope.pe --target=cuda -o gpu/vit_rope.pkg
then there:
    python3 tests/bench/gpu_train_step.py --packages gpu --bin build-gpu/bin \
        [--models vit_rope,vit_cayley] [--batches 256,1024] [--steps 50] \
        [--precision fp32|tf32|bf16]
The peer gets its best set-up: F.scaled_dot_product_attention, torch.compile
in its default mode and in "max-autotune" (CUDA graphs; the faster is
reported), the same float32 parameters. Precision: fp32 (exact float32 on
both sides), tf32 (both sides may use TF32 tensor cores for the GEMMs), bf16
(stringc: packages compiled with --gpu-precision=bf16, i.e. tensor-core
attention and bf16 GEMMs on float32 storage; PyTorch: torch.autocast to
bfloat16 around the forward and the loss, float32 master weights and AdamW).
A stringc failure (a package the GPU cannot run
yet) is printed and the peer's figures are still reported.
"""
import argparse
import os
import re
import subprocess
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_vit  # noqa: E402


def time_stringc(bin_dir, package, batch, steps, precision):
    # A bf16 package chooses its own GEMM precision; --tf32 is for fp32 packages.
    cmd = [os.path.join(bin_dir, "stringrun"), "bench", package, "--device", "cuda",
           "--batch", str(batch), "--steps", str(steps)] + (["--tf32"] if precision == "tf32" else [])
    run = subprocess.run(cmd, capture_output=True, text=True)
    match = re.search(r"([0-9.]+) images/s", run.stdout)
    if run.returncode != 0 or not match:
        return None, (run.stderr or run.stdout).strip().splitlines()[-1:]
    return float(match.group(1)), []


def make_step(model, batch, compile_mode, bf16):
    torch.manual_seed(0)
    net = torch_vit.ViT(cayley=(model == "vit_cayley"), sdpa=True).cuda()
    opt = torch.optim.AdamW(net.parameters(), lr=2e-3, weight_decay=0.05, fused=True)
    images = torch.rand(batch, 1, 28, 28, device="cuda")
    labels = torch.randint(0, 10, (batch,), device="cuda")
    forward = net if compile_mode is None else torch.compile(net, mode=compile_mode)

    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=bf16):
            loss = F.cross_entropy(forward(images), labels)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
        opt.step()
    return step


def time_torch(model, batch, steps, compile_mode, bf16):
    step = make_step(model, batch, compile_mode, bf16)
    for _ in range(5):  # warm-up (and compilation)
        step()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(steps):
        step()
    torch.cuda.synchronize()
    return batch * steps / (time.perf_counter() - start)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--packages", required=True, help="directory of MODEL.pkg (target cuda)")
    parser.add_argument("--bin", required=True, help="directory of the runtime's stringrun")
    parser.add_argument("--models", default="vit_rope,vit_cayley")
    parser.add_argument("--batches", default="256,1024")
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--precision", choices=("fp32", "tf32", "bf16"), default="fp32")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit("no CUDA device visible to PyTorch")
    tf32, bf16 = args.precision == "tf32", args.precision == "bf16"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    device = torch.cuda.get_device_name()
    print(f"device: {device}; torch {torch.__version__}; "
          f"precision: {args.precision} (packages from {args.packages})")
    print(f"{'model':<11} {'batch':>5} {'stringc':>9} {'eager':>9} {'compile':>9} "
          f"{'vs eager':>8} {'vs compile':>10}   (images/s)")
    for model in args.models.split(","):
        for batch in [int(b) for b in args.batches.split(",")]:
            ours, why = time_stringc(args.bin, os.path.join(args.packages, model + ".pkg"), batch,
                                     args.steps, args.precision)
            eager = time_torch(model, batch, args.steps, None, bf16)
            compiled = max(time_torch(model, batch, args.steps, mode, bf16)
                           for mode in ("default", "max-autotune"))
            if ours is None:
                print(f"{model:<11} {batch:>5} {'failed':>9} {eager:9.0f} {compiled:9.0f}"
                      f"   stringc: {' '.join(why)}")
            else:
                print(f"{model:<11} {batch:>5} {ours:9.0f} {eager:9.0f} {compiled:9.0f} "
                      f"{ours / eager:7.2f}x {ours / compiled:9.2f}x")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
