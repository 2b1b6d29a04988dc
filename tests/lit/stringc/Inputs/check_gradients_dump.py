"""Checks a `stringrun gradients` file against the log of a training run.

check_gradients_dump.py DUMP LOG.csv: DUMP must hold input.image (F32
[B, 1, 4, 4]), input.label (I32 [B]), param.NAME for every parameter of
tiny_mlp (F32), grad.NAME for the trainable ones only, and loss (F32, []);
its loss must be the loss LOG.csv records for step 1, and the global norm of
its gradients the grad_norm of step 1. Prints "ok" and the names.
"""
import array
import csv
import json
import math
import struct
import sys


def read(path):
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    meta = header.pop("__metadata__", {})
    data = raw[8 + n:]
    out = {}
    for name, info in header.items():
        begin, end = info["data_offsets"]
        values = array.array({"F32": "f", "I32": "i"}[info["dtype"]])
        values.frombytes(data[begin:end])
        out[name] = (info["dtype"], info["shape"], values)
    return out, meta


def main(dump, log):
    tensors, meta = read(dump)
    with open(log) as f:
        step1 = next(r for r in csv.DictReader(f) if r["kind"] == "train" and r["step"] == "1")
    batch = int(meta["batch"])
    expect = {
        "input.image": ("F32", [batch, 1, 4, 4]), "input.label": ("I32", [batch]),
        "param.w_patch": ("F32", [16, 8]), "param.b_patch": ("F32", [8]),
        "param.gain": ("F32", [8]), "param.w_head": ("F32", [8, 3]),
        "param.b_head": ("F32", [3]), "grad.w_patch": ("F32", [16, 8]),
        "grad.b_patch": ("F32", [8]), "grad.w_head": ("F32", [8, 3]),
        "grad.b_head": ("F32", [3]), "loss": ("F32", []),
    }
    got = {name: (t[0], t[1]) for name, t in tensors.items()}
    if got != expect:
        sys.exit(f"tensors {got}, expected {expect}")
    loss = tensors["loss"][2][0]
    if f"{loss:.9g}" != step1["loss"]:
        sys.exit(f"loss {loss:.9g}, the log's step 1: {step1['loss']}")
    norm = math.sqrt(sum(v * v for n, t in tensors.items() if n.startswith("grad.")
                         for v in t[2]))
    if abs(norm - float(step1["grad_norm"])) > 1e-6 * norm:
        sys.exit(f"gradient norm {norm}, the log's step 1: {step1['grad_norm']}")
    print("ok", meta["format"], meta["model"], "seed", meta["seed"], " ".join(sorted(tensors)))


if __name__ == "__main__":
    main(*sys.argv[1:])
