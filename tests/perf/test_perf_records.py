"""The CTest perf-records: every record under tests/perf/records/ is well
formed (perf_records.py check), and a malformed one is refused with a message
naming its file and field; add-step writes a record that check accepts.

test_perf_records.py WORKDIR
"""
import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "perf_records.py")


def run(*args):
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True)


def main():
    work = sys.argv[1]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    r = run("check")
    assert r.returncode == 0, r.stdout + r.stderr
    print(r.stdout.strip())

    good = json.load(open(os.path.join(HERE, "records", "2026-11-27-h200.json")))
    cases = [
        ("card", lambda rec: rec.update(card="A100"), "card 'A100'"),
        ("step_ms", lambda rec: rec["measurements"][0].update(step_ms=3.0), "step_ms 3.0"),
        ("source", lambda rec: rec["measurements"][0].pop("source"), "missing 'source'"),
        ("stale", lambda rec: rec["measurements"][0].update(stale=""), "'stale' must say why"),
        ("batch", lambda rec: rec["measurements"][0].update(batch=0), "'batch' is 0"),
    ]
    for name, breaks, fragment in cases:
        directory = os.path.join(work, name)
        os.makedirs(directory)
        record = json.loads(json.dumps(good))
        breaks(record)
        with open(os.path.join(directory, "bad.json"), "w") as f:
            json.dump(record, f)
        r = run("check", directory)
        assert r.returncode == 1 and fragment in r.stderr and "bad.json" in r.stderr, \
            f"{name}: exit {r.returncode}: {r.stderr}"
        print(f"ok: refused ({name}): {r.stderr.strip()}")

    path = os.path.join(work, "new", "2026-12-01-h100.json")
    r = run("add-step", path, "--card", "H100", "--date", "2026-12-01", "--commit", "abc1234",
            "--model", "vit_rope", "--batch", "128", "--precision", "fp32",
            "--images-per-second", "64000", "--command", "stringrun bench", "--source", "test")
    assert r.returncode == 0, r.stderr
    record = json.load(open(path))
    assert record["measurements"][0]["step_ms"] == 2.0, record
    assert run("check", os.path.dirname(path)).returncode == 0
    print("ok: add-step writes a record that check accepts")


if __name__ == "__main__":
    main()
