"""Checks the scaling section of `stringc --launch-report --ranks=N`.

scaling_check.py N nvlink|ib MIN_PERCENT < REPORT

Recomputes from the printed bucket table what ScalingReport.h's model says:
the ring all-reduce bytes (2 (N - 1) / N x the gradients), each bucket's
start (when it is ready, or when the one before it ends) and end (2 (N - 1)
hops + its bytes over the link), the exposed time after the backward and the
efficiency; checks the bucket sizes (1 MiB, then 25 MiB, all but the last)
and that the efficiency is at least MIN_PERCENT. Prints "ok: ..." or
"FAIL: ..." (exit 1).
"""
import re
import sys

LINKS = {"nvlink": (450e9, 1e-6, "NVLink 4"), "ib": (50e9, 4e-6, "InfiniBand 400 Gb/s")}


def fail(message):
    print(f"FAIL: {message}")
    sys.exit(1)


def near(got, want, tol, what):
    if abs(got - want) > tol:
        fail(f"{what}: printed {got}, the model gives {want:.3f}")


def main():
    n, link, minimum = int(sys.argv[1]), sys.argv[2], float(sys.argv[3])
    bw, hop, name = LINKS[link]
    text = sys.stdin.read()
    head = re.search(r"scaling: (\d+) data-parallel ranks.*over (.+?) \(", text)
    if not head or int(head.group(1)) != n or head.group(2) != name:
        fail(f"no scaling section for {n} ranks over {name}")
    buckets = [tuple(float(x) for x in m.groups()) for m in re.finditer(
        r"^\s+\d+\s+(\d+)\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)$", text, re.M)]
    if not buckets:
        fail("no buckets")
    total = sum(b[1] for b in buckets)  # MB
    grads = float(re.search(r"gradients: ([0-9.]+) MB", text).group(1))
    near(grads, total, 0.05 + 0.005 * len(buckets), "gradient MB")
    reduced = float(re.search(r"= ([0-9.]+) MB per GPU per step", text).group(1))
    near(reduced, 2 * (n - 1) / n * total, 0.05 + 0.01 * len(buckets), "all-reduce MB")
    for i, b in enumerate(buckets[:-1]):
        cap = 1.048576 if i == 0 else 26.2144
        if b[1] < cap - 0.005:
            fail(f"bucket {i + 1} has {b[1]} MB, under its cap of {cap} MB")
    end = 0.0
    for i, (_, mb, ready, start, stop) in enumerate(buckets):
        want_start = max(ready, end)
        near(start, want_start, 0.15, f"bucket {i + 1}'s start")
        want_end = want_start + (2 * (n - 1) * hop + 2 * (n - 1) / n * mb * 1e6 / bw) * 1e6
        near(stop, want_end, 0.25, f"bucket {i + 1}'s end")
        end = stop
    backward = float(re.search(r"the backward \(@gradients\) ends at ([0-9.]+) us", text).group(1))
    exposed = float(re.search(r"([0-9.]+) us exposed", text).group(1))
    near(exposed, max(0.0, end - backward), 0.25, "exposed us")
    step = float(re.search(r"\(one GPU: ([0-9.]+) us\)", text).group(1))
    efficiency = float(re.search(r"scaling efficiency ([0-9.]+)%", text).group(1))
    near(efficiency, 100 * step / (step + exposed), 0.06, "efficiency")
    if efficiency < minimum:
        fail(f"scaling efficiency {efficiency}% < {minimum:g}%")
    print(f"ok: scaling efficiency {efficiency}% >= {minimum:g}%")


if __name__ == "__main__":
    main()
