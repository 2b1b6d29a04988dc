"""The training step on the compiler-generated CPU kernels against the
runtime's fast kernels, in one run (docs/codegen.md).

    /usr/bin/python3 tests/bench/compiled_kernels.py [--models vit_rope,ew_stack] \
        [--batch 128] [--steps 10] [--threads 2] [--rounds 3] [--bin build/bin]

Each model is compiled once with `stringc --target=cpu` (a package with
generated kernels); `stringrun bench --kernels compiled` and `--kernels fast`
then run on it alternately, `--rounds` times each, and the best ms/step of
each is printed with their ratio (fast / compiled: above 1, the generated
kernels are faster). `ew_stack` is tests/bench/ew_stack.pe, a step made
mostly of the ops the code generator covers; the others are examples/*.pe.
Also prints how long `stringc --target=cpu` took, and the kernel count.
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def model_path(name):
    bench = os.path.join(ROOT, "tests", "bench", name + ".pe")
    return bench if os.path.exists(bench) else os.path.join(ROOT, "examples", name + ".pe")


def run(cmd):
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{result.stdout}{result.stderr}")
    return result.stdout


def bench(stringrun, pkg, kernels, args):
    out = run([stringrun, "bench", pkg, "--kernels", kernels, "--batch", str(args.batch),
               "--steps", str(args.steps), "--threads", str(args.threads)])
    match = re.search(r"\(([0-9.]+) ms/step", out)
    if not match:
        sys.exit("cannot read ms/step from stringrun bench:\n" + out)
    return float(match.group(1))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default="vit_rope,ew_stack")
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    args = parser.parse_args()
    stringc = os.path.join(args.bin, "stringc")
    stringrun = os.path.join(args.bin, "stringrun")
    print(f"batch {args.batch}, {args.threads} threads, best of {args.rounds} x {args.steps} steps")
    print(f"{'model':<14} {'kernels':>16} {'compile s':>9} {'compiled ms':>11} {'fast ms':>8} {'ratio':>6}")
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models.split(","):
            pkg = os.path.join(tmp, name + ".pkg")
            start = time.perf_counter()
            run([stringc, model_path(name), "--target=cpu", "-o", pkg])
            compile_s = time.perf_counter() - start
            header = run([stringc, model_path(name), "--emit=kernels"]).splitlines()[0]
            count = re.search(r"// (\d+) kernels for (\d+) of (\d+) ops", header)
            kernels = f"{count.group(1)} for {count.group(2)}/{count.group(3)}" if count else "?"
            best = {"compiled": float("inf"), "fast": float("inf")}
            for _ in range(args.rounds):
                for k in best:
                    best[k] = min(best[k], bench(stringrun, pkg, k, args))
            print(f"{name:<14} {kernels:>16} {compile_s:>9.2f} {best['compiled']:>11.2f} "
                  f"{best['fast']:>8.2f} {best['fast'] / best['compiled']:>5.2f}x")


if __name__ == "__main__":
    main()
