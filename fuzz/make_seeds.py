#!/usr/bin/env python3
"""Writes seed inputs for the fuzz targets (docs/fuzzing.md).

make_seeds.py OUT_DIR [--tools BIN_DIR] [--small]

OUT_DIR/<target>/ gets:
  frontend    every .pe file of the source tree (examples, tests)
  package     packages of tiny_mlp (cpu-reference; cuda; cpu with its kernel
              library's ELF magic broken and the checksum made to match, so
              loading reaches the library checks without handing mutated
              shared objects to the dynamic loader) and of every example
              (cpu-reference)
  checkpoint  tiny_mlp checkpoints (AdamW and SGD), a parameter file
  idx         tiny image and label files, plain and gzipped
  text        small text corpora

Packages and checkpoints need stringc and stringrun from a build of the whole
project (BIN_DIR, default ./build/bin); without them only the rest is
written. --small writes only the few small seeds committed under fuzz/seeds.
"""
import argparse
import glob
import gzip
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY_MLP = os.path.join(ROOT, "tests/lit/stringc/Inputs/tiny_mlp.pe")
MAKE_TINY_IDX = os.path.join(ROOT, "tests/lit/stringc/Inputs/make_tiny_idx.py")


def run(*args):
    subprocess.run(args, check=True, stdout=subprocess.DEVNULL)


def fnv1a64(data):
    """The kernel library's checksum (runtime/src/core/KernelLibrary.cpp)."""
    h = 0xCBF29CE484222325
    for b in data:
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return "%016x" % h


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    return json.loads(data[8:8 + n]), data[8 + n:]


def write_safetensors(path, header, body):
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + body)


def break_elf(package, out):
    """The cpu package with its library's ELF magic changed and the checksum
    recomputed: Package::load gets past the checksum and stops at the ELF
    checks."""
    header, body = read_safetensors(package)
    (name,) = [k for k in header if k != "__metadata__"]
    begin, end = header[name]["data_offsets"]
    library = bytearray(body[begin:end])
    assert library[:4] == b"\x7fELF", "the kernel section is not an ELF file"
    library[3:4] = b"G"
    body = body[:begin] + bytes(library) + body[end:]
    header["__metadata__"]["kernels_checksum"] = fnv1a64(library)
    write_safetensors(out, header, body)


def sgd_variant(directory):
    """tiny_mlp trained with SGD (momentum), for SGD checkpoints."""
    with open(TINY_MLP) as f:
        text = f.read()
    old = "optimizer adamw(lr = 0.05, weight_decay = 0.01, clip = 1.0)"
    assert old in text
    path = os.path.join(directory, "tiny_mlp_sgd.pe")
    with open(path, "w") as f:
        f.write(text.replace(old, "optimizer sgd(lr = 0.05, momentum = 0.9)"))
    return path


def frontend_seeds(out):
    patterns = ["examples/*.pe", "tests/lit/**/*.pe", "tests/bench/*.pe", "tests/cuda/*.pe"]
    for pattern in patterns:
        for path in glob.glob(os.path.join(ROOT, pattern), recursive=True):
            shutil.copy(path, os.path.join(out, os.path.basename(path)))


def idx_seeds(out, small):
    with tempfile.TemporaryDirectory() as tmp:
        run(sys.executable, MAKE_TINY_IDX, tmp)
        names = ["train-images-idx3-ubyte", "train-labels-idx1-ubyte"]
        if not small:
            names += ["t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"]
        for name in names:
            with open(os.path.join(tmp, name), "rb") as f:
                data = f.read()
            with open(os.path.join(out, name), "wb") as f:
                f.write(data)
            with open(os.path.join(out, name + ".gz"), "wb") as f:
                f.write(gzip.compress(data, mtime=0))


def text_seeds(out):
    # The first byte is the context length the target uses (1 + byte % 32).
    with open(os.path.join(out, "pangram"), "wb") as f:
        f.write(b"\x07The quick brown fox jumps over the lazy dog.\n" * 3)
    with open(os.path.join(out, "bytes"), "wb") as f:
        f.write(b"\x00" + bytes(range(256)))


def tool_seeds(out, tools, small):
    stringc = os.path.join(tools, "stringc")
    stringrun = os.path.join(tools, "stringrun")
    package_dir = os.path.join(out, "package")
    checkpoint_dir = os.path.join(out, "checkpoint")
    with tempfile.TemporaryDirectory() as tmp:
        ref = os.path.join(package_dir, "tiny_mlp.cpu-reference.pkg")
        run(stringc, TINY_MLP, "--target=cpu-reference", "-o", ref)
        cpu = os.path.join(tmp, "tiny_mlp.cpu.pkg")
        run(stringc, TINY_MLP, "--target=cpu", "-o", cpu)
        break_elf(cpu, os.path.join(package_dir, "tiny_mlp.cpu-broken-elf.pkg"))
        if not small:
            try:
                run(stringc, TINY_MLP, "--target=cuda", "-o",
                    os.path.join(package_dir, "tiny_mlp.cuda.pkg"))
            except subprocess.CalledProcessError:
                # A build without the GPU code generator or libdevice.
                print("make_seeds: stringc --target=cuda failed: no cuda package seed")
            for example in glob.glob(os.path.join(ROOT, "examples/*.pe")):
                name = os.path.basename(example)[:-3]
                run(stringc, example, "--target=cpu-reference", "-o",
                    os.path.join(package_dir, name + ".cpu-reference.pkg"))

        data = os.path.join(tmp, "data")
        run(sys.executable, MAKE_TINY_IDX, data)
        train = ["--data", data, "--epochs", "1", "--batch", "4", "--seed", "3"]
        run(stringrun, "train", ref, *train,
            "--checkpoint", os.path.join(checkpoint_dir, "tiny_mlp.adamw.ckpt"))
        sgd = os.path.join(tmp, "sgd.pkg")
        run(stringc, sgd_variant(tmp), "--target=cpu-reference", "-o", sgd)
        run(stringrun, "train", sgd, *train,
            "--checkpoint", os.path.join(checkpoint_dir, "tiny_mlp.sgd.ckpt"))
        run(stringrun, "gradients", ref, "--data", data, "--batch", "4",
            "--out", os.path.join(checkpoint_dir, "tiny_mlp.gradients.safetensors"))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--tools", default=os.path.join(ROOT, "build/bin"))
    parser.add_argument("--small", action="store_true")
    args = parser.parse_args()
    for target in ["frontend", "package", "checkpoint", "idx", "text"]:
        os.makedirs(os.path.join(args.out, target), exist_ok=True)
    if not args.small:
        frontend_seeds(os.path.join(args.out, "frontend"))
        shutil.copy(os.path.join(ROOT, "tests/lit/Frontend/Inputs/weights.safetensors"),
                    os.path.join(args.out, "checkpoint"))
    idx_seeds(os.path.join(args.out, "idx"), args.small)
    text_seeds(os.path.join(args.out, "text"))
    if os.access(os.path.join(args.tools, "stringc"), os.X_OK):
        tool_seeds(args.out, args.tools, args.small)
    else:
        print(f"make_seeds: no stringc in {args.tools}: no package or checkpoint seeds")


if __name__ == "__main__":
    main()
