"""scripts/plot_curves.py on small logs written here (the CTest test
plot_curves): one run and two runs give a PNG; a missing file, a file that is
not a training log and a malformed row are errors naming the file.

test_plot_curves.py PLOT_CURVES.py WORKDIR. Exits 77 (CTest: skipped) where
matplotlib cannot be imported.
"""
import os
import subprocess
import sys

HEADER = "kind,step,epoch,loss,lr,grad_norm,accuracy,perplexity,units_per_s\n"
CLASSIFIER = HEADER + "".join(
    f"train,{s},1,{2.0 / s:.4f},{0.01 * s},0.5,,,100.0\n" for s in range(1, 7)
) + "eval,3,1,0.9,,,0.615,,\neval,6,2,0.7,,,0.7025,,\n"
EMA = CLASSIFIER + "eval_ema,3,1,0.95,,,0.6,,\neval_ema,6,2,0.65,,,0.72,,\n"
TEXT = HEADER + "".join(
    f"train,{s},1,{3.0 / s:.4f},0.001,0.5,,,100.0\n" for s in range(1, 5)
) + "eval,4,1,2.5,,,,12.18,\n"


def run(script, *args):
    return subprocess.run([sys.executable, script, *args], capture_output=True, text=True)


def expect_png(script, out, *logs):
    if os.path.exists(out):
        os.remove(out)
    r = run(script, *logs, "-o", out)
    assert r.returncode == 0, f"exit {r.returncode}: {r.stderr}"
    with open(out, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n", f"{out} is not a PNG"
    print(f"ok: {' '.join(os.path.basename(l) for l in logs)} -> {os.path.basename(out)}")


def expect_error(script, log, *fragments):
    r = run(script, log, "-o", log + ".png")
    assert r.returncode == 1, f"{log}: exit {r.returncode}, expected 1"
    for fragment in (log,) + fragments:
        assert fragment in r.stderr, f"{log}: '{fragment}' not in: {r.stderr}"
    assert not os.path.exists(log + ".png")
    print(f"ok: {os.path.basename(log)} refused: {r.stderr.strip()}")


def main():
    script, work = sys.argv[1], sys.argv[2]
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        print(f"SKIP: {sys.executable} cannot import matplotlib "
              "(Debian: apt-get install python3-matplotlib)")
        return 77
    os.makedirs(work, exist_ok=True)
    logs = {"vit.csv": CLASSIFIER, "gpt.csv": TEXT, "header.csv": "step,loss\n1,2\n",
            "number.csv": HEADER + "train,1,1,abc,0.1,,,,\n",
            "step.csv": HEADER + "train,x,1,1.0,0.1,,,,\n",
            "ema.csv": EMA, "kind.csv": HEADER + "test,1,1,1.0,,,0.5,,\n",
            "empty.csv": HEADER}
    for name, text in logs.items():
        with open(os.path.join(work, name), "w") as f:
            f.write(text)
    path = lambda name: os.path.join(work, name)
    expect_png(script, path("one.png"), path("vit.csv"))
    expect_png(script, path("two.png"), path("vit.csv"), path("gpt.csv"))
    expect_png(script, path("ema.png"), path("ema.csv"), path("vit.csv"))
    expect_error(script, path("missing.csv"), "cannot read")
    expect_error(script, path("header.csv"), "not a stringrun training log")
    expect_error(script, path("number.csv"), ":2: loss 'abc' is not a number")
    expect_error(script, path("step.csv"), ":2: step 'x' is not an integer")
    expect_error(script, path("empty.csv"), "the log has no rows")
    expect_error(script, path("kind.csv"), ":2: unknown row kind 'test'")
    return 0


if __name__ == "__main__":
    sys.exit(main())
