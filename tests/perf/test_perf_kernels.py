"""scripts/perf_kernels.py on files written here (the CTest test
perf_kernels): what is not a package, or a package without generated
kernels, is refused with a message naming the file, before any tool runs
(so the test needs neither perf nor binutils), and bad counts are refused.

test_perf_kernels.py PERF_KERNELS.py WORKDIR
"""
import json
import os
import struct
import subprocess
import sys


def safetensors(path, tensors, metadata=None):
    """A safetensors file with U8 tensors {name: bytes}."""
    header, data = {}, b""
    for name, payload in tensors.items():
        header[name] = {"dtype": "U8", "shape": [len(payload)],
                        "data_offsets": [len(data), len(data) + len(payload)]}
        data += payload
    if metadata:
        header["__metadata__"] = metadata
    text = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data)


def expect_error(script, args, *fragments):
    r = subprocess.run([sys.executable, script, *args], capture_output=True, text=True)
    assert r.returncode == 1, f"{args}: exit {r.returncode}, expected 1: {r.stderr}"
    for fragment in fragments:
        assert fragment in r.stderr, f"{args}: '{fragment}' not in: {r.stderr}"
    print(f"ok: {' '.join(os.path.basename(a) for a in args)}: {r.stderr.strip()}")


def main():
    script, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    missing = os.path.join(work, "missing.pkg")
    text = os.path.join(work, "notes.txt")
    with open(text, "w") as f:
        f.write("not a package at all\n")
    short = os.path.join(work, "short.pkg")
    with open(short, "wb") as f:
        f.write(b"\x01\x02")
    bad_json = os.path.join(work, "bad_json.pkg")
    with open(bad_json, "wb") as f:
        f.write(struct.pack("<Q", 5) + b"{oops")
    reference = os.path.join(work, "reference.pkg")
    safetensors(reference, {"other": b"\x00" * 4}, {"format": "stringc-package", "target": "cpu-reference"})
    not_elf = os.path.join(work, "not_elf.pkg")
    safetensors(not_elf, {"kernels.so": b"MZ" + b"\x00" * 62}, {"format": "stringc-package", "target": "cpu"})

    outside = os.path.join(work, "outside.pkg")
    text_ = json.dumps({"kernels.so": {"dtype": "U8", "shape": [64], "data_offsets": [0, 64]}}).encode()
    with open(outside, "wb") as f:
        f.write(struct.pack("<Q", len(text_)) + text_ + b"\x7fELF")  # 4 bytes, not 64

    expect_error(script, [missing], missing, "cannot read")
    expect_error(script, [outside], outside, "do not lie within the file's 4 bytes")
    expect_error(script, [text], text, "is not a package")
    expect_error(script, [short], short, "no safetensors header")
    expect_error(script, [bad_json], bad_json, "not JSON")
    expect_error(script, [reference], reference, "no generated kernels", "--target=cpu")
    expect_error(script, [not_elf], not_elf, "not an ELF shared object")
    expect_error(script, [reference, "--steps", "0"], "--steps must be a positive integer")
    expect_error(script, [reference, "--batch", "-4"], "--batch must be a positive integer")


if __name__ == "__main__":
    main()
