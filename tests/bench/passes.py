"""The training step of each seed model with all passes, with none, and with
each pass switched off alone, timed in one run (docs/passes.md).

    /usr/bin/python3 tests/bench/passes.py [--models vit_rope,vit_cayley] \
        [--batch 64] [--steps 5] [--threads 2] [--bin build/bin]

For every model it compiles one package per configuration (`stringc
--disable-pass=NAME`, `--pass-pipeline=` for none), runs `stringrun bench` on
each (alternating, best of --rounds), and prints ms/step and the ratio to the
all-passes package: a ratio
above 1 means that switching the pass off makes the step slower, i.e. the
pass pays. A pass whose train IR is unchanged on a model does not fire there
and is not timed. Opt-in passes (`--enable-pass`) are timed switched on.
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
    """The default and the opt-in passes, from the error that lists them."""
    out = subprocess.run([stringc, os.path.join(ROOT, "examples", "vit_rope.pe"), "--emit=pe-opt",
                          "--disable-pass=?"], capture_output=True, text=True).stderr
    match = re.search(r"the passes are:([^;)]*); opt-in:([^)]*)\)", out)
    if not match:
        sys.exit("cannot read the pass list from stringc:\n" + out)
    return match.group(1).split(), match.group(2).split()


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
    parser.add_argument("--rounds", type=int, default=3,
                        help="time every configuration this many times, alternating; keep the best")
    parser.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    args = parser.parse_args()
    stringc = os.path.join(args.bin, "stringc")
    stringrun = os.path.join(args.bin, "stringrun")
    passes, opt_in = pass_names(stringc)
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
        for name in opt_in:
            configs.append((f"with opt-in {name}", [f"--enable-pass={name}"]))
        configs.append(("no passes", ["--pass-pipeline="]))

        print(f"\n{model}" + (f" (not firing: {', '.join(quiet)})" if quiet else ""))
        packages = []
        for index, (label, flags) in enumerate(configs):
            pkg = os.path.join(work, f"{model}-{index}.pkg")
            run([stringc, source, "--target=cpu", "-o", pkg] + flags)
            packages.append(pkg)
        # Alternate the configurations round by round so that a burst of
        # load on a shared machine hits them all alike; keep each one's best.
        best = [float("inf")] * len(configs)
        for _ in range(args.rounds):
            for index, pkg in enumerate(packages):
                best[index] = min(best[index], bench(stringrun, pkg, args.batch, args.steps, args.threads))
        for (label, _), ms in zip(configs, best):
            print(f"  {label:34s} {ms:9.2f} ms/step  {ms / best[0]:5.2f}x")


if __name__ == "__main__":
    main()
