#!/usr/bin/env python3
"""Where a CPU training step spends its time, the generated kernels included.

`perf record` sees a package's generated kernels as anonymous code in a
memfd ("/memfd:stringc-kernels (deleted)") and cannot name them. This runs
`stringrun bench` under `perf record` (or reads a perf.data written before),
takes the kernels' shared object out of the package (its `kernels.so`
tensor, docs/package.md), and maps each sample in that mapping back to its
kernel's symbol; the runtime's own functions keep perf's names. With
`--kernel NAME` it splits that kernel's samples by innermost loop (a
backward branch and its target) and prints each loop's instruction mix:
the view that showed where the attention and layer-norm kernels wait
(docs/results.md). Needs `perf` and binutils (`nm`, `objdump`, `readelf`).

    python3 scripts/perf_kernels.py PACKAGE [--batch 128] [--steps 20] [--threads 2]
        [--stringrun build/bin/stringrun] [--perf-data FILE] [--kernel SUBSTRING] [--top 25]
"""
import argparse
import bisect
import collections
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile

MEMFD = "memfd:stringc-kernels"


def fail(message):
    sys.exit(f"perf_kernels.py: {message}")


def kernel_library(package):
    """The bytes of the package's kernels.so tensor (a safetensors container)."""
    try:
        with open(package, "rb") as f:
            data = f.read()
    except OSError as e:
        fail(f"cannot read {package}: {e.strerror}")
    if len(data) < 8:
        fail(f"{package} is not a package: {len(data)} bytes, no safetensors header")
    (length,) = struct.unpack("<Q", data[:8])
    if length > len(data) - 8:
        fail(f"{package} is not a package: its header claims {length} bytes, the file has "
             f"{len(data) - 8} after the length")
    try:
        header = json.loads(data[8:8 + length])
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        fail(f"{package} is not a package: its header is not JSON ({e})")
    entry = header.get("kernels.so") if isinstance(header, dict) else None
    if not isinstance(entry, dict) or "data_offsets" not in entry:
        fail(f"{package} has no generated kernels (no kernels.so tensor): compile it with "
             f"stringc --target=cpu")
    offsets, body = entry["data_offsets"], len(data) - 8 - length
    if (not isinstance(offsets, list) or len(offsets) != 2
            or not all(isinstance(o, int) for o in offsets)
            or not 0 <= offsets[0] <= offsets[1] <= body):
        fail(f"{package}: kernels.so's data_offsets {offsets!r} do not lie within the file's "
             f"{body} bytes of data")
    blob = data[8 + length + offsets[0]:8 + length + offsets[1]]
    if not blob.startswith(b"\x7fELF"):
        fail(f"{package}: kernels.so is not an ELF shared object")
    return blob


def run(command, what):
    try:
        return subprocess.run(command, check=True, capture_output=True, text=True).stdout
    except FileNotFoundError:
        fail(f"{command[0]} is not installed ({what})")
    except subprocess.CalledProcessError as e:
        fail(f"{' '.join(command)} failed ({what}):\n{e.stderr.strip()}")


class Library:
    """The kernels' ELF: its text symbols and its file-offset -> address map."""

    def __init__(self, path):
        self.path = path
        self.symbols = []
        for line in run(["nm", "-n", "--defined-only", path], "the kernels' symbols").splitlines():
            fields = line.split()
            if len(fields) == 3 and fields[1] in "tT":
                self.symbols.append((int(fields[0], 16), fields[2]))
        self.starts = [address for address, _ in self.symbols]
        self.segments = []
        for line in run(["readelf", "-lW", path], "the kernels' segments").splitlines():
            fields = line.split()
            if fields and fields[0] == "LOAD":
                offset, address, size = (int(fields[i], 16) for i in (1, 2, 4))
                self.segments.append((offset, address, size))

    def address(self, offset):
        for start, address, size in self.segments:
            if start <= offset < start + size:
                return offset - start + address
        return offset

    def symbol(self, address):
        i = bisect.bisect_right(self.starts, address) - 1
        return self.symbols[i][1] if i >= 0 else "?"


def samples(perf_data):
    """(address in the kernels' ELF or None, perf's symbol, dso) per sample."""
    text = run(["perf", "script", "-i", perf_data, "--show-mmap-events", "-F", "ip,sym,dso"],
               "reading the samples")
    mmap = re.compile(r"\[0x([0-9a-f]+)\(0x[0-9a-f]+\) @ (0x[0-9a-f]+|0) .*r-xp /" + MEMFD)
    # "IP SYMBOL (DSO)": C++ symbols hold spaces and parentheses, the DSO is
    # a path (the memfd's ends in " (deleted)") or "[kernel.kallsyms]".
    sample = re.compile(r"^\s*([0-9a-f]+)\s+(.*?)\s*\(((?:/|\[)[^()]*(?: \(deleted\))?)\)\s*$")
    base = None
    for line in text.splitlines():
        if "PERF_RECORD" in line:
            m = mmap.search(line)
            if m:
                base = int(m.group(1), 16) - int(m.group(2), 16)
            continue
        m = sample.match(line)
        if not m:
            continue
        ip, symbol, dso = int(m.group(1), 16), m.group(2), m.group(3)
        if MEMFD in dso and base is not None:
            yield ip - base, symbol, dso
        else:
            if not symbol or symbol == "[unknown]":
                symbol = f"[unknown] in {os.path.basename(dso)}"
            yield None, symbol, dso


def loop_table(library, kernel, counts, top):
    """The samples of one kernel by innermost loop, with each loop's instruction mix."""
    text = run(["objdump", "-d", "--no-show-raw-insn", library.path], "disassembling")
    instructions, current = [], None
    for line in text.splitlines():
        m = re.match(r"^([0-9a-f]+) <(.*)>:", line)
        if m:
            current = m.group(2)
            continue
        m = re.match(r"^\s+([0-9a-f]+):\s+(.*)", line)
        if m and current and kernel in current:
            instructions.append((int(m.group(1), 16), m.group(2)))
    if not instructions:
        fail(f"no kernel of the package has '{kernel}' in its name")
    loops = []
    for address, text_ in instructions:
        m = re.match(r"j\w+\s+([0-9a-f]+)", text_)
        if m and int(m.group(1), 16) <= address:
            loops.append((int(m.group(1), 16), address))
    total = sum(counts[a] for a, _ in instructions)
    by_loop = collections.Counter()
    for address, _ in instructions:
        inner = None
        for lo, hi in loops:
            if lo <= address <= hi and (inner is None or hi - lo < inner[1] - inner[0]):
                inner = (lo, hi)
        by_loop[inner] += counts[address]
    print(f"\n{total} samples in kernels matching '{kernel}', by innermost loop:")
    for loop, count in by_loop.most_common(top):
        if count == 0:
            break
        share = 100.0 * count / max(total, 1)
        if loop is None:
            print(f"{count:7d} {share:5.1f}%  outside any loop")
            continue
        body = [t for a, t in instructions if loop[0] <= a <= loop[1]]
        mix = collections.Counter(t.split()[0] for t in body)
        print(f"{count:7d} {share:5.1f}%  {loop[0]:x}-{loop[1]:x}, {len(body)} instructions: "
              + " ".join(f"{op}:{n}" for op, n in mix.most_common(8)))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("package")
    p.add_argument("--stringrun", default="build/bin/stringrun")
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--perf-data", help="read this perf.data instead of recording one")
    p.add_argument("--kernel", help="split this kernel's samples by loop (a substring of its name)")
    p.add_argument("--top", type=int, default=25)
    a = p.parse_args()
    for name in ("batch", "steps", "threads", "top"):
        if getattr(a, name) <= 0:
            fail(f"--{name} must be a positive integer")
    if a.steps > 100000 or a.batch > 1 << 20:
        fail("--steps at most 100000 and --batch at most 2^20")
    blob = kernel_library(a.package)  # a bad package is refused before any tool runs
    for tool in ("perf", "nm", "objdump", "readelf"):
        if shutil.which(tool) is None:
            fail(f"{tool} is not installed (perf: Debian's linux-perf; the rest: binutils)")
    with tempfile.TemporaryDirectory() as scratch:
        so = os.path.join(scratch, "kernels.so")
        with open(so, "wb") as f:
            f.write(blob)
        library = Library(so)
        perf_data = a.perf_data
        if perf_data is None:
            perf_data = os.path.join(scratch, "perf.data")
            run(["perf", "record", "-F", "4000", "-o", perf_data, "--", a.stringrun, "bench",
                 a.package, "--batch", str(a.batch), "--steps", str(a.steps), "--threads",
                 str(a.threads)], "recording the step")
        by_name, by_address, total = collections.Counter(), collections.Counter(), 0
        for offset, symbol, _ in samples(perf_data):
            total += 1
            if offset is None:
                by_name[symbol] += 1
            else:
                address = library.address(offset)
                by_address[address] += 1
                by_name["[kernel] " + library.symbol(address)] += 1
        if total == 0:
            fail(f"{perf_data} has no samples")
        kernels = sum(c for n, c in by_name.items() if n.startswith("[kernel] "))
        print(f"{total} samples, {100.0 * kernels / total:.1f}% in the generated kernels")
        for name, count in by_name.most_common(a.top):
            print(f"{100.0 * count / total:6.2f}%  {name[:150]}")
        if a.kernel:
            loop_table(library, a.kernel, by_address, a.top)


if __name__ == "__main__":
    main()
