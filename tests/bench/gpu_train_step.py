#!/usr/bin/env python3
"""Times the full ViT training step (forward, backward, AdamW) on one NVIDIA
GPU in stringc and in PyTorch in one run: same model, batch, data shape and
precision. Prints images/s of stringc, PyTorch eager, torch.compile (default
mode) and torch.compile(mode="reduce-overhead") (CUDA graphs), and stringc's
ratio to eager and to the fastest PyTorch mode (issue 12's goals: 1.5x for
vit_rope and vit_cayley, 1.2x for vit_s_rope in bf16). With --reports, the
launch report's predicted step (stringc --launch-report) beside it.

It runs on the GPU machine, which has PyTorch and the runtime but no MLIR:
scripts/gpu_packages.sh compiles the packages and the reports here, then there:
    python3 tests/bench/gpu_train_step.py --packages gpu/examples --bin build-gpu/stringrun \
        [--models vit_rope,vit_cayley,vit_s_rope] [--batches 128,256,1024] [--steps 50] \
        [--precision fp32|tf32|bf16] [--data gpu/fashion-mnist] [--reports gpu/reports] \
        [--max-autotune]
With --encodings (no peer): every ViT example's package in --packages
(ENCODINGS) timed against vit_rope's in the same run, alternated, each
printed as its step and the ratio to vit_rope's step (issue 43's goal:
<= 1.15x, vit_generators <= 1.5x), with the launch report's predicted ratio
beside it when --reports has the reports.
The peer gets its best set-up: F.scaled_dot_product_attention, fused AdamW,
the same float32 parameters; torch.compile's "max-autotune" too with
--max-autotune (it compiled for 5 minutes on an H100 for one model: off by
default so that a run fits a 10-minute device call). Precision: fp32 (exact
float32 on both sides), tf32 (both sides may use TF32 tensor cores for the
GEMMs), bf16 (stringc: packages compiled with --gpu-precision=bf16; PyTorch:
torch.autocast to bfloat16 around the forward and the loss, float32 master
weights and AdamW). A stringc failure (a package the GPU cannot run yet) is
printed and the peer's figures are still reported.
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


# The peer of each example: torch_vit.ViT's arguments.
MODELS = {
    "vit_rope": {},
    "vit_cayley": {"cayley": True},
    "vit_s_rope": {"dim": 384, "heads": 6, "depth": 12, "mlp": 1536, "patch": 2},
    # scripts/gpu_packages.sh writes its package beside the examples' (gpu/).
    "vit_rope_dropout": torch_vit.DROPOUT_VARIANT,
}


def package_path(packages, model):
    """MODEL.pkg in `packages`, else in its parent (gpu/vit_rope_dropout.pkg)."""
    path = os.path.join(packages, model + ".pkg")
    beside = os.path.join(os.path.dirname(os.path.normpath(packages)), model + ".pkg")
    return path if os.path.exists(path) or not os.path.exists(beside) else beside


def default_data():
    for candidate in ("gpu/fashion-mnist", "/usr/share/datasets/fashion-mnist"):
        if os.path.isdir(candidate):
            return candidate
    return None


def time_stringc(bin_dir, package, batch, steps, precision, data):
    # A bf16 package chooses its own GEMM precision; --tf32 is for fp32 packages.
    cmd = [os.path.join(bin_dir, "stringrun"), "bench", package, "--device", "cuda",
           "--batch", str(batch), "--steps", str(steps)] + (["--tf32"] if precision == "tf32" else [])
    if data:
        cmd += ["--data", data]
    run = subprocess.run(cmd, capture_output=True, text=True)
    match = re.search(r"([0-9.]+) images/s", run.stdout)
    if run.returncode != 0 or not match:
        return None, (run.stderr or run.stdout).strip().splitlines()[-1:]
    return float(match.group(1)), []


def make_step(model, batch, compile_mode, bf16):
    torch.manual_seed(0)
    net = torch_vit.ViT(sdpa=True, **MODELS[model]).cuda()
    opt = torch.optim.AdamW(net.parameters(), **torch_vit.adamw_settings(model), fused=True)
    images = torch.rand(batch, 1, 28, 28, device="cuda")
    labels = torch.randint(0, 10, (batch,), device="cuda")
    forward = net if compile_mode is None else torch.compile(net, mode=compile_mode)
    smoothing = torch_vit.label_smoothing(model)

    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=bf16):
            loss = F.cross_entropy(forward(images), labels, label_smoothing=smoothing)
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


def predicted(reports, model, batch, precision):
    """images/s of the launch report's predicted step, if there is a report."""
    if not reports:
        return None
    path = os.path.join(reports, f"{model}-{batch}-{'bf16' if precision == 'bf16' else 'fp32'}.txt")
    if not os.path.exists(path):
        return None
    match = re.search(r"predicted ([0-9.]+) us, roofline bound", open(path).read())
    return batch / (float(match.group(1)) * 1e-6) if match else None


# The ViT examples of issue 43's table, timed against vit_rope.
ENCODINGS = ["vit_cayley", "vit_sparse_cayley", "vit_string", "vit_polar", "vit_reflection",
             "vit_generators"]


def encoding_overhead(args):
    """Each ENCODINGS step and its ratio to vit_rope's (alternated), per batch."""
    print(f"{'model':<18} {'batch':>5} {'step ms':>9} {'vit_rope ms':>11} {'ratio':>6} "
          f"{'predicted ratio':>15}")
    for batch in [int(b) for b in args.batches.split(",")]:
        def step_ms(model):
            ours, why = time_stringc(args.bin, package_path(args.packages, model), batch,
                                     args.steps, args.precision, args.data)
            return (1000.0 * batch / ours if ours else None), why
        rope, _ = step_ms("vit_rope")
        guess_rope = predicted(args.reports, "vit_rope", batch, args.precision)
        for model in ENCODINGS:
            ours, why = step_ms(model)
            after, _ = step_ms("vit_rope")
            guess = predicted(args.reports, model, batch, args.precision)
            guess_text = f"{guess_rope / guess:14.2f}x" if guess and guess_rope else f"{'-':>15}"
            if ours is None or rope is None or after is None:
                print(f"{model:<18} {batch:>5} {'failed':>9}   {' '.join(why)}")
            else:
                base = (rope + after) / 2
                print(f"{model:<18} {batch:>5} {ours:9.3f} {base:11.3f} {ours / base:5.2f}x "
                      f"{guess_text}")
            rope = after
            sys.stdout.flush()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--packages", required=True, help="directory of MODEL.pkg (target cuda)")
    parser.add_argument("--bin", required=True, help="directory of the runtime's stringrun")
    parser.add_argument("--models", default="vit_rope,vit_cayley")
    parser.add_argument("--batches", default="128,256,1024")
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--precision", choices=("fp32", "tf32", "bf16"), default="fp32")
    parser.add_argument("--data", default=default_data(), help="the Fashion-MNIST IDX directory")
    parser.add_argument("--reports", help="directory of launch reports MODEL-BATCH-fp32|bf16.txt")
    parser.add_argument("--max-autotune", action="store_true",
                        help='also time torch.compile(mode="max-autotune") (minutes to compile)')
    parser.add_argument("--modes", default="default,reduce-overhead",
                        help="torch.compile modes to time beside eager (comma list; each compiles "
                             "for tens of seconds per model and batch)")
    parser.add_argument("--encodings", action="store_true",
                        help="time every ViT example against vit_rope (stringc only)")
    args = parser.parse_args()
    if args.encodings:
        encoding_overhead(args)
        return
    if not torch.cuda.is_available():
        sys.exit("no CUDA device visible to PyTorch")
    for model in args.models.split(","):
        if model not in MODELS:
            sys.exit(f"unknown model {model} (expected one of {', '.join(MODELS)})")
    tf32, bf16 = args.precision == "tf32", args.precision == "bf16"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    modes = [m for m in args.modes.split(",") if m] + (["max-autotune"] if args.max_autotune else [])
    device = torch.cuda.get_device_name()
    print(f"device: {device}; torch {torch.__version__}; precision: {args.precision} "
          f"(packages from {args.packages}, data {args.data})")
    print(f"{'model':<11} {'batch':>5} {'stringc':>9} {'eager':>9} "
          + " ".join(f"{m:>15}" for m in modes)
          + f" {'vs eager':>8} {'vs best':>8} {'predicted':>10}   (images/s)")
    for model in args.models.split(","):
        for batch in [int(b) for b in args.batches.split(",")]:
            ours, why = time_stringc(args.bin, package_path(args.packages, model), batch,
                                     args.steps, args.precision, args.data)
            eager = time_torch(model, batch, args.steps, None, bf16)
            compiled = [time_torch(model, batch, args.steps, mode, bf16) for mode in modes]
            best = max([eager] + compiled)
            guess = predicted(args.reports, model, batch, args.precision)
            guess_text = f"{guess:10.0f}" if guess else f"{'-':>10}"
            peers = f"{eager:9.0f} " + " ".join(f"{c:15.0f}" for c in compiled)
            if ours is None:
                print(f"{model:<11} {batch:>5} {'failed':>9} {peers} {'':>8} {'':>8} {guess_text}"
                      f"   stringc: {' '.join(why)}")
            else:
                print(f"{model:<11} {batch:>5} {ours:9.0f} {peers} {ours / eager:7.2f}x "
                      f"{ours / best:7.2f}x {guess_text}")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
