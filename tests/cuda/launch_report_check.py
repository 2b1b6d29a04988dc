"""Checks training steps against the launch report's model (docs/cuda.md,
"Launch report").

launch_report_check.py STRINGC BATCH MODEL.pe...  runs
`stringc MODEL.pe --target=cuda --launch-report --batch=BATCH` on each model;
launch_report_check.py --report FILE...           reads saved reports.

A step passes when no launch whose work grows with the batch runs on fewer
blocks than the GPU has SMs (the report marks them UNDERFILLED) or keeps too
few bytes in flight for the bandwidth (Little's law: LATENCY-BOUND, e.g. a
reduction on one block of a grid-wide sum). A report without the
LATENCY-BOUND count (the old model's, which charged bytes and FLOPs only)
must also have its predicted time within 3x of its roofline bound. Prints one
line per step and, for a failing one, its flagged launches; exits 1 if any
fails. (The calibrated prediction is no longer compared with the roofline
bound: it charges the measured GEMM and attention times the roofline omits;
tests/perf/calibrate.py compares it with the GPU.)
"""
import re
import subprocess
import sys

MAX_PREDICTED_OVER_BOUND = 3.0


def check(name, report):
    ratio = re.search(r"predicted / bound ([0-9.]+)x", report)
    under = re.search(r"on fewer blocks than SMs: ([0-9]+)", report)
    latency = re.search(r"keep too few bytes in flight: ([0-9]+)", report)
    if not ratio or not under:
        print(f"{name}: FAIL: not a launch report")
        return False
    ratio, under = float(ratio.group(1)), int(under.group(1))
    if latency:
        latency = int(latency.group(1))
        ok = under == 0 and latency == 0
        print(f"{name}: {'ok' if ok else 'FAIL'}: {under} under-filled launches, "
              f"{latency} latency-bound launches")
    else:
        ok = under == 0 and ratio <= MAX_PREDICTED_OVER_BOUND
        print(f"{name}: {'ok' if ok else 'FAIL'}: {under} under-filled launches, "
              f"predicted / bound {ratio:.2f}x (at most {MAX_PREDICTED_OVER_BOUND:.0f}x)")
    for line in report.splitlines():
        if line.endswith("UNDERFILLED") or line.endswith("LATENCY-BOUND"):
            print("  " + " ".join(line.split()[1:5]) + " " + line.split()[-1])
    return ok


def main(argv):
    if len(argv) >= 2 and argv[0] == "--report":
        steps = [(path, open(path).read()) for path in argv[1:]]
    elif len(argv) >= 3:
        stringc, batch = argv[0], argv[1]
        steps = []
        for model in argv[2:]:
            run = subprocess.run(
                [stringc, model, "--target=cuda", "--launch-report", f"--batch={batch}"],
                capture_output=True, text=True)
            if run.returncode != 0:
                sys.exit(f"{model}: stringc failed:\n{run.stderr}")
            steps.append((model, run.stdout))
    else:
        sys.exit(__doc__)
    results = [check(name, report) for name, report in steps]
    sys.exit(0 if all(results) else 1)


if __name__ == "__main__":
    main(sys.argv[1:])
