"""Compares two runs of one model on different kernel sets (or thread counts).

compare_kernel_runs.py A.st B.st TOL: two `stringrun gradients` files of the
same batch and parameters. They must hold the same tensors (names, dtypes,
shapes); the inputs (input.*) and parameters (param.*) bit for bit; the loss
and every gradient (grad.*) to TOL relative, norm-wise per tensor
(||a - b|| / ||b||). Prints "ok: loss and N gradients agree to TOL".

compare_kernel_runs.py A.csv B.csv TOL: two `stringrun train --log` files of
the same run. The same rows (kind, step, epoch); every loss and grad_norm to
TOL relative. Prints "ok: N train and M eval rows agree to TOL".
"""
import csv
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_gradients_dump import read  # noqa: E402


def rel(a, b):
    diff = math.sqrt(sum((x - y) ** 2 for x, y in zip(a, b)))
    return diff / max(math.sqrt(sum(y * y for y in b)), 1e-30)


def compare_dumps(a_path, b_path, tol_text):
    tol = float(tol_text)
    a, _ = read(a_path)
    b, _ = read(b_path)
    shapes = lambda ts: {n: (t[0], t[1]) for n, t in ts.items()}  # noqa: E731
    if shapes(a) != shapes(b):
        sys.exit(f"tensors differ: {shapes(a)} vs {shapes(b)}")
    grads = 0
    for name in sorted(a):
        va, vb = list(a[name][2]), list(b[name][2])
        if name.startswith(("input.", "param.")):
            if va != vb:
                sys.exit(f"{name} differs")
            continue
        err = rel(va, vb)
        if not err <= tol:
            sys.exit(f"{name}: relative error {err:.3e} > {tol}")
        grads += name.startswith("grad.")
    print(f"ok: loss and {grads} gradients agree to {tol_text}")


def compare_logs(a_path, b_path, tol_text):
    tol = float(tol_text)
    def rows(path):
        with open(path) as f:
            return list(csv.DictReader(f))
    a, b = rows(a_path), rows(b_path)
    key = lambda r: (r["kind"], r["step"], r["epoch"])  # noqa: E731
    if [key(r) for r in a] != [key(r) for r in b]:
        sys.exit("the logs have different rows")
    for ra, rb in zip(a, b):
        for column in ("loss", "grad_norm"):
            if not ra[column]:
                continue
            x, y = float(ra[column]), float(rb[column])
            if not abs(x - y) <= tol * abs(y):
                sys.exit(f"{key(ra)} {column}: {x} vs {y}")
    train = sum(r["kind"] == "train" for r in a)
    print(f"ok: {train} train and {len(a) - train} eval rows agree to {tol_text}")


def main(a_path, b_path, tol):
    """`tol` as given on the command line (printed as given)."""
    compare = compare_logs if a_path.endswith(".csv") else compare_dumps
    compare(a_path, b_path, tol)


if __name__ == "__main__":
    main(*sys.argv[1:])
