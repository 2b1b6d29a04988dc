#!/usr/bin/env python3
"""Turns `ncu --print-summary per-kernel --metrics gpu__time_duration.sum` output
into a table of GPU time per training step, largest first (docs/cuda.md).

    python3 scripts/ncu_table.py NCU.txt [--steps 2] [--top 25]

--steps: how many steps the profiled run executed (stringrun bench --steps 1
runs a warm-up step and the timed one: 2)."""
import argparse
import re
import sys

HEADER = re.compile(r"^  (\S.*?) \((\d+), (\d+), (\d+)\)x\((\d+), (\d+), (\d+)\), .*Invocations (\d+)")
TIME = re.compile(r"gpu__time_duration\.sum\s+(\w+)\s+([\d.,]+)\s+([\d.,]+)\s+([\d.,]+)")
SCALE = {"ns": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3, "s": 1e6, "second": 1e6}


def parse(lines):
    rows, current = [], None
    for line in lines:
        head = HEADER.match(line)
        if head:
            name = head.group(1)
            grid = int(head.group(2)) * int(head.group(3)) * int(head.group(4))
            block = int(head.group(5)) * int(head.group(6)) * int(head.group(7))
            current = [name, grid, block, int(head.group(8))]
            continue
        timing = TIME.search(line)
        if timing and current:
            average_us = float(timing.group(4).replace(",", "")) * SCALE[timing.group(1)]
            rows.append(current + [average_us])
            current = None
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("log")
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()
    rows = parse(open(args.log, errors="replace"))
    if not rows:
        sys.exit(f"{args.log}: no per-kernel summary (did ncu run?)")
    total = sum(r[3] * r[4] for r in rows) / args.steps
    launches = sum(r[3] for r in rows) // args.steps
    print(f"{total / 1e3:.3f} ms of kernel time per step, {launches} launches")
    print(f"{'ms/step':>8} {'share':>6} {'launches':>8} {'avg us':>9} {'blocks':>7} {'thr':>5}  kernel")
    rows.sort(key=lambda r: -r[3] * r[4])
    for name, grid, block, calls, average in rows[:args.top]:
        per_step = calls * average / args.steps
        print(f"{per_step / 1e3:8.3f} {100 * per_step / total:5.1f}% {calls // args.steps:8d} "
              f"{average:9.1f} {grid:7d} {block:5d}  {name[:90]}")


if __name__ == "__main__":
    main()
