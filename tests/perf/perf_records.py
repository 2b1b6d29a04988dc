#!/usr/bin/env python3
"""The GPU measurement records under tests/perf/records/ (their format is in
tests/perf/records/README.md): reads, checks and writes them.

    perf_records.py check [DIR]
        checks every record file (fields, types, sources, raw files); exit 1
        on the first bad one, naming the file and the field.
    perf_records.py add-step FILE --card C --date D --commit H --model M
        --batch B --precision P --images-per-second X --command CMD --source S
        [--detail TEXT] [--graphs 0|1]
        adds one measured training step to FILE (created when missing).
    perf_records.py add-kernels FILE --card C --date D --commit H --model M
        --batch B --precision P --ncu LOG --command CMD --source S [--steps N]
        adds the per-kernel table of an `ncu --print-summary per-kernel` log
        (scripts/ncu_table.py parses it); the log is copied beside FILE
        (ncu/<file stem>/<log name>) so the record keeps its raw data.
"""
import argparse
import json
import os
import shutil
import sys

FORMAT = "stringc-perf-record/1"
CARDS = ("H100", "H200")
PRECISIONS = ("fp32", "bf16")
HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_DIR = os.path.join(HERE, "records")


def ncu_table():
    """scripts/ncu_table.py as a module (the one parser of ncu's summaries)."""
    import importlib.util
    path = os.path.join(HERE, "..", "..", "scripts", "ncu_table.py")
    spec = importlib.util.spec_from_file_location("ncu_table", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class RecordError(Exception):
    pass


def _need(entry, field, kind, where):
    if field not in entry:
        raise RecordError(f"{where}: missing '{field}'")
    value = entry[field]
    if kind is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0
    elif kind is int:
        ok = isinstance(value, int) and not isinstance(value, bool) and value > 0
    else:
        ok = isinstance(value, kind) and (not isinstance(value, str) or value.strip())
    if not ok:
        raise RecordError(f"{where}: '{field}' is {value!r}, not a {kind.__name__}"
                          + (" > 0" if kind in (int, float) else ""))
    return value


def check_measurement(m, where, directory):
    kind = _need(m, "kind", str, where)
    for field, type_ in (("model", str), ("batch", int), ("precision", str),
                         ("command", str), ("source", str)):
        _need(m, field, type_, where)
    if m["precision"] not in PRECISIONS:
        raise RecordError(f"{where}: precision '{m['precision']}' is not one of {PRECISIONS}")
    if "stale" in m and not (isinstance(m["stale"], str) and m["stale"].strip()):
        raise RecordError(f"{where}: 'stale' must say why (a non-empty string)")
    if kind == "step":
        ips = _need(m, "images_per_second", float, where)
        step = _need(m, "step_ms", float, where)
        if abs(step - 1e3 * m["batch"] / ips) > 0.01 * step:
            raise RecordError(f"{where}: step_ms {step} is not batch / images_per_second "
                              f"({1e3 * m['batch'] / ips:.4f})")
        _need(m, "graphs", bool, where)
    elif kind == "kernels":
        complete = _need(m, "complete", bool, where)
        rows = _need(m, "kernels", list, where)
        for i, row in enumerate(rows):
            at = f"{where} kernel {i}"
            _need(row, "name", str, at)
            _need(row, "ms_per_step", float, at)
            if complete:
                _need(row, "calls_per_step", float, at)
        if complete:
            raw = _need(m, "raw", str, where)
            if not os.path.isfile(os.path.join(directory, raw)):
                raise RecordError(f"{where}: raw file '{raw}' is not in {directory}")
    else:
        raise RecordError(f"{where}: kind '{kind}' is not 'step' or 'kernels'")


def check_file(path):
    where = os.path.basename(path)
    try:
        with open(path) as f:
            record = json.load(f)
    except (OSError, ValueError) as e:
        raise RecordError(f"{where}: not a JSON record: {e}")
    if record.get("format") != FORMAT:
        raise RecordError(f"{where}: 'format' is {record.get('format')!r}, not '{FORMAT}'")
    for field in ("card", "card_detail", "date", "commit", "source"):
        _need(record, field, str, where)
    if record["card"] not in CARDS:
        raise RecordError(f"{where}: card '{record['card']}' is not one of {CARDS}")
    measurements = _need(record, "measurements", list, where)
    for i, m in enumerate(measurements):
        check_measurement(m, f"{where} measurement {i} ({m.get('model')} {m.get('batch')})",
                          os.path.dirname(path))
    return record


def load(directory=DEFAULT_DIR):
    """Every record file of `directory`, checked: [(file name, record)]."""
    records = []
    for name in sorted(os.listdir(directory)):
        if name.endswith(".json"):
            records.append((name, check_file(os.path.join(directory, name))))
    return records


def _open_or_new(path, args):
    if os.path.exists(path):
        with open(path) as f:
            record = json.load(f)
        for field in ("card", "date", "commit"):
            if record[field] != getattr(args, field):
                sys.exit(f"{path}: its {field} is {record[field]}, not {getattr(args, field)}")
        return record
    return {"format": FORMAT, "card": args.card, "card_detail": args.card_detail or args.card,
            "date": args.date, "commit": args.commit, "source": args.source, "measurements": []}


def _write(path, record):
    check_measurement(record["measurements"][-1], path, os.path.dirname(path))
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path + ".tmp", "w") as f:
        json.dump(record, f, indent=1)
        f.write("\n")
    os.replace(path + ".tmp", path)
    check_file(path)


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="what", required=True)
    check = sub.add_parser("check")
    check.add_argument("dir", nargs="?", default=DEFAULT_DIR)
    for name in ("add-step", "add-kernels"):
        p = sub.add_parser(name)
        p.add_argument("file")
        for field in ("card", "date", "commit", "model", "precision", "command", "source"):
            p.add_argument("--" + field, required=True)
        p.add_argument("--card-detail")
        p.add_argument("--batch", type=int, required=True)
        p.add_argument("--detail")
        if name == "add-step":
            p.add_argument("--images-per-second", type=float, required=True)
            p.add_argument("--graphs", type=int, default=1)
        else:
            p.add_argument("--ncu", required=True)
            p.add_argument("--steps", type=int, default=2)
    args = parser.parse_args(argv)
    try:
        if args.what == "check":
            records = load(args.dir)
            count = sum(len(r["measurements"]) for _, r in records)
            print(f"{len(records)} record files, {count} measurements: ok")
            return 0
        record = _open_or_new(args.file, args)
        m = {"kind": "step" if args.what == "add-step" else "kernels", "model": args.model,
             "batch": args.batch, "precision": args.precision, "command": args.command,
             "source": args.source}
        if args.detail:
            m["detail"] = args.detail
        if args.what == "add-step":
            m["images_per_second"] = args.images_per_second
            m["step_ms"] = round(1e3 * args.batch / args.images_per_second, 4)
            m["graphs"] = bool(args.graphs)
        else:
            rows = ncu_table().parse(open(args.ncu, errors="replace"))
            if not rows:
                sys.exit(f"{args.ncu}: no per-kernel summary (did ncu run?)")
            stem = os.path.splitext(os.path.basename(args.file))[0]
            raw = os.path.join("ncu", stem, os.path.basename(args.ncu))
            os.makedirs(os.path.join(os.path.dirname(os.path.abspath(args.file)), "ncu", stem),
                        exist_ok=True)
            shutil.copyfile(args.ncu, os.path.join(os.path.dirname(os.path.abspath(args.file)), raw))
            m.update(kernel_rows(rows, args.steps))
            m["raw"] = raw
        record["measurements"].append(m)
        _write(args.file, record)
        print(f"{args.file}: {m['kind']} {args.model} {args.batch} {args.precision} added")
    except RecordError as e:
        print(f"perf_records: {e}", file=sys.stderr)
        return 1
    return 0


def kernel_rows(rows, steps):
    """ncu_table rows [name, grid, block, invocations, average us] as the
    record's fields, per step, largest first."""
    kernels = [{"name": name, "grid": grid, "block": block,
                "calls_per_step": calls / steps,
                "ms_per_step": round(calls * average / steps / 1e3, 6)}
               for name, grid, block, calls, average in rows]
    kernels.sort(key=lambda k: -k["ms_per_step"])
    return {"steps_profiled": steps, "complete": True,
            "kernel_ms_per_step": round(sum(k["ms_per_step"] for k in kernels), 4),
            "launches_per_step": sum(k["calls_per_step"] for k in kernels),
            "kernels": kernels}


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
