#!/usr/bin/env python3
"""Fits the launch report's cuBLAS table (compiler/lib/CudaGen/MeasuredKernels.cpp)
to the GEMM time of the whole ncu tables of tests/perf/records/ measured on
an H100: per arithmetic, t = t0 + max(FLOPs / R, bytes / B) for each of the
report's GEMM launches, summed over a step, against the step's measured time
in cuBLAS's kernels (GEMMs and their split-K reductions). B is fixed (3.0e12
B/s); t0 and R minimise the squared relative error over the records (the
TF32 fit, with one record, takes the f32 t0).

    fit_gemm_table.py STRINGC EXAMPLES_DIR [--records DIR]
"""
import argparse
import json
import math
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import perf_records  # noqa: E402

CUBLAS = re.compile(r"gemm|cutlass|splitKreduce|xmma|cublas", re.I)
BYTES_PER_SECOND = 3.0e12


def gemm_launches(stringc, examples, m):
    command = [stringc, os.path.join(examples, m["model"] + ".pe"), "--target=cuda",
               "--launch-report=json", f"--batch={m['batch']}", f"--gpu-precision={m['precision']}"]
    report = json.loads(subprocess.run(command, capture_output=True, text=True, check=True).stdout)
    return [(l["flops"], l["bytes"], l["arithmetic"]) for l in report["launches"]
            if l["kernel"] == "cublas gemm"]


def predicted(launches, t0, rate):
    return sum(t0 + max(f / rate, b / BYTES_PER_SECOND) for f, b, _ in launches)


def fit(points, t0s):
    best = None
    for t0 in t0s:
        for step in range(400):
            rate = 1e12 * 10 ** (step / 100)  # 1 to 1e4 TFLOP/s
            error = sum(math.log(predicted(l, t0, rate) / s) ** 2 for l, s in points)
            if best is None or error < best[0]:
                best = (error, t0, rate)
    return best


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("stringc")
    parser.add_argument("examples")
    parser.add_argument("--records", default=perf_records.DEFAULT_DIR)
    args = parser.parse_args(argv)
    points = {"f32": [], "tf32": []}
    for file, record in perf_records.load(args.records):
        if record["card"] != "H100":
            continue
        for m in record["measurements"]:
            if m["kind"] != "kernels" or not m["complete"]:
                continue
            measured = sum(k["ms_per_step"] for k in m["kernels"] if CUBLAS.search(k["name"])) / 1e3
            launches = gemm_launches(args.stringc, args.examples, m)
            arithmetic = launches[0][2]
            points[arithmetic].append((launches, measured))
            print(f"{file}: {m['model']} {m['batch']} {m['precision']}: {len(launches)} GEMM launches"
                  f" ({arithmetic}), {sum(f for f, _, _ in launches) / 1e9:.1f} GFLOP, measured"
                  f" {measured * 1e3:.3f} ms of cuBLAS kernels")
    error, t0, rate = fit(points["f32"], [i * 0.25e-6 for i in range(81)])
    print(f"f32:  t0 {t0 * 1e6:.2f} us, R {rate / 1e12:.1f} TFLOP/s (rms log error {math.sqrt(error / len(points['f32'])):.3f})")
    for launches, measured in points["f32"]:
        print(f"  predicted {predicted(launches, t0, rate) * 1e3:.3f} ms, measured {measured * 1e3:.3f}")
    if points["tf32"]:
        error, t0t, ratet = fit(points["tf32"], [t0])
        print(f"tf32: t0 {t0t * 1e6:.2f} us, R {ratet / 1e12:.1f} TFLOP/s")
        for launches, measured in points["tf32"]:
            print(f"  predicted {predicted(launches, t0t, ratet) * 1e3:.3f} ms, measured {measured * 1e3:.3f}")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
