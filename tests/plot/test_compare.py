"""scripts/compare.py on a tiny grid (the CTest test compare_grid): two
encodings (RoPE and a learned position table) x two seeds x two epochs of a
tiny ViT on 4x4 images, evaluated at 4 and 8 pixels.

With --interpolate-positions position_scale: tiny_vit_rope (which has the
constant) is evaluated at 8 pixels twice, its positions as trained and
interpolated (position_scale = 4 / 8); tiny_vit_ape (which has not) once.

Checks the outputs (results.csv's rows, the Markdown table, two PNGs that
matplotlib reads back), that a rerun runs nothing, that an interrupted
training resumes from its checkpoint to the very accuracy of the unbroken
run, and that runs of another version of a model are refused.

test_compare.py COMPARE.py BIN_DIR WORK_DIR INPUTS_DIR (INPUTS_DIR:
tests/lit/stringc/Inputs: tiny_vit_rope.pe, tiny_vit_ape.pe,
make_tiny_idx.py). Exits 77 (CTest: skipped) without matplotlib.
"""
import csv
import os
import shutil
import subprocess
import sys


def run(*command):
    return subprocess.run(list(command), capture_output=True, text=True)


def check(condition, message):
    if not condition:
        sys.exit(f"FAIL: {message}")


def main():
    script, bindir, work, inputs = sys.argv[1:5]
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.image
    except ImportError:
        print(f"SKIP: {sys.executable} cannot import matplotlib")
        sys.exit(77)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    data = os.path.join(work, "data")
    subprocess.run([sys.executable, os.path.join(inputs, "make_tiny_idx.py"), data], check=True)
    models = []
    for name in ("tiny_vit_rope", "tiny_vit_ape"):
        models.append(os.path.join(work, name + ".pe"))
        shutil.copy(os.path.join(inputs, name + ".pe"), models[-1])
    out = os.path.join(work, "out")
    grid = [sys.executable, script, *models, "--seeds", "1,2", "--epochs", "2", "--batch", "4",
            "--eval-sizes", "4,8", "--jobs", "2", "--threads", "1", "--data", data,
            "--out", out, "--bin", bindir, "--interpolate-positions", "position_scale"]

    first = run(*grid)
    check(first.returncode == 0, f"compare.py failed: {first.stdout}{first.stderr}")
    check("[4/4 trained, 10/10 evaluated" in first.stdout,
          f"no final progress line:\n{first.stdout}")
    check("tiny_vit_ape.pe has no constant 'position_scale'" in first.stdout,
          f"no note on the model without the constant:\n{first.stdout}")
    with open(os.path.join(out, "results.csv"), newline="") as f:
        rows = list(csv.DictReader(f))
    check(len(rows) == 10, f"{len(rows)} rows, expected 2 models x 2 seeds x 2 sizes + "
          "tiny_vit_rope's 2 seeds interpolated at 8 px")
    check({(r["example"], r["seed"], r["eval_size"], r["positions"]) for r in rows} ==
          {(m, s, z, "as trained") for m in ("tiny_vit_rope", "tiny_vit_ape") for s in "12"
           for z in "48"} | {("tiny_vit_rope", s, "8", "interpolated") for s in "12"},
          "the rows are not the grid")
    # The interpolated package scales the 4 x 4 grid's positions by 4 / 8.
    interpolated = os.path.join(out, "packages", "tiny_vit_rope@8-interpolated.pkg")
    check(os.path.exists(interpolated), "no interpolated package")
    ir = run(os.path.join(bindir, "stringc"), models[0], "-D", "image_size=8", "-D",
             "position_scale=0.5")
    check("pe.scale" in ir.stdout and "factor(5.000000e-01)" in ir.stdout,
          f"-D position_scale=0.5 scales no positions:\n{ir.stdout[-2000:]}")
    for r in rows:
        check(0 <= float(r["test_accuracy"]) <= 100 and float(r["test_loss"]) > 0
              and float(r["wall_s"]) > 0 and float(r["images_per_s"]) > 0
              and r["epochs"] == "2" and r["trained_size"] == "4", f"bad row {r}")
    with open(os.path.join(out, "results.md")) as f:
        table = f.read()
    for fragment in ("| model | 4 px | 8 px | wall time per run | images/s |",
                     "| `tiny_vit_rope` | ", "| `tiny_vit_ape` | ",
                     "| `tiny_vit_rope, positions interpolated` | ", "- 4 px: separated:",
                     "- 8 px: separated:", "2 epochs at batch 4"):
        check(fragment in table, f"'{fragment}' not in results.md:\n{table}")
    for picture in ("accuracy_epochs.png", "accuracy_size.png"):
        path = os.path.join(out, picture)
        with open(path, "rb") as f:
            check(f.read(8) == b"\x89PNG\r\n\x1a\n", f"{picture} is not a PNG")
        pixels = matplotlib.image.imread(path)
        check(pixels.ndim == 3 and pixels.shape[0] > 100 and pixels.shape[1] > 100,
              f"{picture}: {pixels.shape}")
    print("ok: the grid ran: 10 rows (2 interpolated), the table and two pictures")

    # A rerun runs nothing and writes the same results.
    checkpoint = os.path.join(out, "runs", "tiny_vit_ape", "seed2", "checkpoint.safetensors")
    stamp = os.stat(checkpoint).st_mtime_ns
    again = run(*grid)
    check(again.returncode == 0, f"the rerun failed: {again.stdout}{again.stderr}")
    check("nothing to run" in again.stdout and "compiling" not in again.stdout
          and ": training" not in again.stdout, f"the rerun ran something:\n{again.stdout}")
    check(os.stat(checkpoint).st_mtime_ns == stamp, "the rerun rewrote a checkpoint")
    with open(os.path.join(out, "results.csv"), newline="") as f:
        check(list(csv.DictReader(f)) == rows, "the rerun changed results.csv")
    print("ok: a rerun runs nothing")

    # An interrupted training (its checkpoint after step 3 of 6, no
    # train.json, no evaluations) resumes to the unbroken run's accuracy.
    run_dir = os.path.dirname(checkpoint)
    for name in os.listdir(run_dir):
        if name.startswith("eval") or name in ("train.json", "segments.json"):
            os.remove(os.path.join(run_dir, name))
    stopped = run(os.path.join(bindir, "stringrun"), "train",
                  os.path.join(out, "packages", "tiny_vit_ape.pkg"), "--data", data,
                  "--seed", "2", "--init-seed", "2", "--epochs", "2", "--batch", "4",
                  "--stop-after", "3", "--checkpoint", checkpoint, "--threads", "1")
    check(stopped.returncode == 0, f"stringrun --stop-after failed: {stopped.stderr}")
    resumed = run(*grid)
    check(resumed.returncode == 0, f"the resumed grid failed: {resumed.stdout}{resumed.stderr}")
    check("tiny_vit_ape seed 2: training (resumed from its checkpoint)" in resumed.stdout
          and resumed.stdout.count(": training") == 1,
          f"not exactly the one run resumed:\n{resumed.stdout}")
    with open(os.path.join(out, "results.csv"), newline="") as f:
        after = list(csv.DictReader(f))
    strip = lambda rs: [{k: v for k, v in r.items() if k not in ("wall_s", "images_per_s")}
                        for r in rs]
    check(strip(after) == strip(rows), "the resumed run's accuracy or loss differs")
    print("ok: an interrupted training resumes to the same accuracy and loss")

    # Runs of another version of a model are refused.
    with open(models[0], "a") as f:
        f.write("# changed\n")
    changed = run(*grid)
    check(changed.returncode == 1 and "holds runs of another version" in changed.stderr,
          f"a changed model was not refused: {changed.returncode} {changed.stderr}")
    print("ok: runs of another version of a model are refused")


if __name__ == "__main__":
    main()
