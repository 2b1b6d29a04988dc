"""Minimal safetensors reader and writer (no dependency on the safetensors module).

File layout: an 8-byte little-endian unsigned header length N, then N bytes
of UTF-8 JSON {name: {"dtype", "shape", "data_offsets": [begin, end]}, and
optionally "__metadata__": {str: str}}, then the raw little-endian data;
offsets are relative to the first byte after the header.
"""

import json
import struct
import sys

import torch

DTYPES = {
    "F64": torch.float64, "F32": torch.float32, "F16": torch.float16,
    "BF16": torch.bfloat16, "I64": torch.int64, "I32": torch.int32,
    "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8, "BOOL": torch.bool,
}
NAMES = {v: k for k, v in DTYPES.items()}

if sys.byteorder != "little":
    raise ImportError("safetensors_io assumes a little-endian host")


def _to_bytes(t):
    t = t.detach().cpu().contiguous().reshape(-1)
    if t.dtype == torch.bool:
        t = t.to(torch.uint8)
    return t.view(torch.uint8).numpy().tobytes()


def save_safetensors(path, tensors, metadata=None):
    """Write {name: tensor} (in sorted name order) and optional string metadata."""
    header, chunks, offset = {}, [], 0
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    for name in sorted(tensors):
        t = tensors[name]
        if t.dtype not in NAMES:
            raise ValueError(f"{name}: unsupported dtype {t.dtype}")
        data = _to_bytes(t)
        header[name] = {"dtype": NAMES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(data)]}
        chunks.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)             # align the data to 8 bytes
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for data in chunks:
            f.write(data)


def read_safetensors(path):
    """Return ({name: tensor}, metadata dict) of a safetensors file."""
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 8:
        raise ValueError(f"{path}: too short for a safetensors file")
    (n,) = struct.unpack("<Q", raw[:8])
    if 8 + n > len(raw):
        raise ValueError(f"{path}: header length {n} runs past the end of the file")
    header = json.loads(raw[8:8 + n].decode("utf-8"))
    data = bytearray(raw[8 + n:])
    metadata = header.pop("__metadata__", {}) or {}
    out = {}
    for name, info in header.items():
        dtype = DTYPES.get(info["dtype"])
        if dtype is None:
            raise ValueError(f"{path}: {name} has unsupported dtype {info['dtype']}")
        begin, end = info["data_offsets"]
        shape = list(info["shape"])
        count = 1
        for s in shape:
            count *= s
        width = torch.empty(0, dtype=dtype).element_size()
        if end - begin != count * width or end > len(data):
            raise ValueError(f"{path}: {name} has inconsistent data_offsets")
        load = torch.uint8 if dtype == torch.bool else dtype
        if count == 0:
            t = torch.empty(0, dtype=load)
        else:
            t = torch.frombuffer(data, dtype=load, count=count, offset=begin).clone()
        out[name] = t.to(dtype).reshape(shape)
    return out, metadata


def params_from_safetensors(path):
    """{name: tensor} of a safetensors file (metadata dropped)."""
    return read_safetensors(path)[0]
