"""The training step of each seed model with all passes, with none, and with
each pass switched off alone, timed in one run (docs/passes.md).

    /usr/bin/python3 tests/bench/passes.py [--models vit_rope,vit_cayley] \
        [--batch 64] [--steps 5] [--threads 2] [--bin build/bin]

For every model it compiles one package per configuration (`stringc
--disable-pass=NAME`, `--pass-pipeline=` for none), runs `stringrun bench` on
each, and prints ms/step and the ratio to the all-passes package: a ratio
above 1 means that switching the pass off makes the step slower, i.e. the
pass pays. A pass whose train IR is unchanged on a model does not fire there
and is not timed.
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SEED_MODELS = ["vit_rope", "vit_cayley", "vit_string", "vit_reflection", "vit_sparse_cayley",
               "vit_polar", "vit_generators", "gpt_sinusoidal_skip", "gpt_rope_skip",
               "gpt_rope_causal"]


def run(cmd, env=None):
    result = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if result.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{result.stdout}{result.stderr}")
    return result.stdout


def pass_names(stringc):
    """The default passes, from the error that lists them."""
    out = subprocess.run([stringc, os.path.join(ROOT, "examples", "vit_rope.pe"), "--emit=pe-opt",
                          "--disable-pass=?"], capture_output=True, text=True).stderr
    match = re.search(r"the passes are:([^)]*)\)", out)
    if not match:
        sys.exit("cannot read the pass list from stringc:\n" + out)
    return match.group(1).split()


def bench(stringrun, pkg, batch, steps, threads):
    env = dict(os.environ, STRINGRT_THREADS=str(threads))
    out = run([stringrun, "bench", pkg, "--batch", str(batch), "--steps", str(steps)], env)
    match = re.search(r"\(([0-9.]+) ms/step", out)
    if not match:
        sys.exit("cannot read ms/step from stringrun bench:\n" + out)
    return float(match.group(1))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default=",".join(SEED_MODELS))
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    args = parser.parse_args()
    stringc = os.path.join(args.bin, "stringc")
    stringrun = os.path.join(args.bin, "stringrun")
    passes = pass_names(stringc)
    work = tempfile.mkdtemp(prefix="stringc-bench-passes-")

    print(f"batch {args.batch}, {args.steps} steps, {args.threads} threads; "
          "ratio = ms/step of the configuration / ms/step with all passes")
    for model in args.models.split(","):
        source = os.path.join(ROOT, "examples", model + ".pe")
        if not os.path.exists(source):
            print(f"\n{model}: no examples/{model}.pe, skipped")
            continue
        configs = [("all passes", [])]
        full_ir = run([stringc, source, "--emit=pe-train"])
        quiet = []
        for name in passes:
            flags = [f"--disable-pass={name}"]
            if run([stringc, source, "--emit=pe-train"] + flags) == full_ir:
                quiet.append(name)
            else:
                configs.append((f"without {name}", flags))
        configs.append(("no passes", ["--pass-pipeline="]))

        print(f"\n{model}" + (f" (not firing: {', '.join(quiet)})" if quiet else ""))
        base = None
        for label, flags in configs:
            pkg = os.path.join(work, f"{model}-{len(label)}-{abs(hash(label))}.pkg")
            run([stringc, source, "--target=cpu", "-o", pkg] + flags)
            ms = bench(stringrun, pkg, args.batch, args.steps, args.threads)
            base = base or ms
            print(f"  {label:34s} {ms:9.2f} ms/step  {ms / base:5.2f}x")


if __name__ == "__main__":
    main()
