#!/usr/bin/env python3
"""Writes seed inputs for the fuzz targets (docs/fuzzing.md).

make_seeds.py OUT_DIR [--tools BIN_DIR] [--small]

OUT_DIR/<target>/ gets:
  frontend    every .pe file of the source tree (examples, tests)
  package     packages of tiny_mlp (cpu-reference; cuda, also with dropout
              and an EMA; cpu with its kernel
              library's ELF magic broken and the checksum made to match, so
              loading reaches the library checks without handing mutated
              shared objects to the dynamic loader) and of every example
              (cpu-reference)
  checkpoint  tiny_mlp checkpoints (AdamW and SGD), a parameter file
  idx         tiny image and label files, plain and gzipped
  text        small text corpora
  arrays      image and token data sets as .npy, .npz (stored, deflated) and
              safetensors files, each after the byte that picks its kind

Packages and checkpoints need stringc and stringrun from a build of the whole
project (BIN_DIR, default ./build/bin); without them only the rest is
written. --small writes only the few small seeds committed under fuzz/seeds.
"""
import argparse
import glob
import gzip
import io
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY_MLP = os.path.join(ROOT, "tests/lit/stringc/Inputs/tiny_mlp.pe")
MAKE_TINY_IDX = os.path.join(ROOT, "tests/lit/stringc/Inputs/make_tiny_idx.py")
sys.path.insert(0, os.path.join(ROOT, "tests/lit/stringc/Inputs"))
import make_tiny_npz  # noqa: E402  (the lit tests' .npz writer)


def run(*args):
    subprocess.run(args, check=True, stdout=subprocess.DEVNULL)


def fnv1a64(data):
    """The kernel library's checksum (runtime/src/core/format/KernelLibrary.cpp)."""
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


def arrays_seeds(out):
    # Byte 0 picks the target's file kind (% 3: npy, npz, safetensors) and
    # tokens or images (/ 3 % 2); see fuzz/targets/arrays.cpp.
    npy, npz, safetensors, images, tokens = 0, 1, 2, 0, 3
    data = make_tiny_npz.arrays(None)
    for method, name in ((zipfile.ZIP_STORED, "images-stored.npz"),
                         (zipfile.ZIP_DEFLATED, "images-deflated.npz")):
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w", method) as archive:
            for member, (descr, shape, raw) in data.items():
                info = zipfile.ZipInfo(member + ".npy", date_time=(1980, 1, 1, 0, 0, 0))
                info.compress_type = method  # a fixed date: the same bytes every run
                archive.writestr(info, make_tiny_npz.npy_bytes(descr, shape, raw))
        with open(os.path.join(out, name), "wb") as f:
            f.write(bytes([npz + images]) + buffer.getvalue())
    header, body, offset = {}, b"", 0
    dtypes = {"|u1": "U8", "<i8": "I64"}
    for member, (descr, shape, raw) in sorted(data.items()):
        header[member] = {"dtype": dtypes[descr], "shape": list(shape),
                          "data_offsets": [offset, offset + len(raw)]}
        body += raw
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    with open(os.path.join(out, "images.safetensors"), "wb") as f:
        f.write(bytes([safetensors + images]) + struct.pack("<Q", len(text)) + text + body)
    ids = list(b"The quick brown fox jumps over the lazy dog.")
    raw = struct.pack("<%di" % len(ids), *ids)
    with open(os.path.join(out, "tokens.npy"), "wb") as f:
        f.write(bytes([npy + tokens]) + make_tiny_npz.npy_bytes("<i4", (len(ids),), raw))


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
            # With dropout (a launch argument {"step_key": true}) and an EMA
            # of the weights (pe_ema): tiny_mlp's text changed in two lines.
            with open(TINY_MLP) as f:
                text = f.read()
            regularised = os.path.join(tmp, "tiny_mlp_regularised.pe")
            with open(regularised, "w") as f:
                f.write(text.replace("let h = relu(select_token(x, index = 0)) * gain",
                                     "let h = dropout(relu(select_token(x, index = 0)), p = 0.5) * gain")
                        .replace("clip = 1.0)", "clip = 1.0, ema = 0.9)"))
            try:
                run(stringc, TINY_MLP, "--target=cuda", "-o",
                    os.path.join(package_dir, "tiny_mlp.cuda.pkg"))
                run(stringc, regularised, "--target=cuda", "-o",
                    os.path.join(package_dir, "tiny_mlp_regularised.cuda.pkg"))
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
    for target in ["frontend", "package", "checkpoint", "idx", "text", "arrays"]:
        os.makedirs(os.path.join(args.out, target), exist_ok=True)
    if not args.small:
        frontend_seeds(os.path.join(args.out, "frontend"))
        shutil.copy(os.path.join(ROOT, "tests/lit/Frontend/Inputs/weights.safetensors"),
                    os.path.join(args.out, "checkpoint"))
    idx_seeds(os.path.join(args.out, "idx"), args.small)
    text_seeds(os.path.join(args.out, "text"))
    arrays_seeds(os.path.join(args.out, "arrays"))
    if os.access(os.path.join(args.tools, "stringc"), os.X_OK):
        tool_seeds(args.out, args.tools, args.small)
    else:
        print(f"make_seeds: no stringc in {args.tools}: no package or checkpoint seeds")


if __name__ == "__main__":
    main()
