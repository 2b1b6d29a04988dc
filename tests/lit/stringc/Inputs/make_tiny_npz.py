"""Writes the tiny image set of make_tiny_idx.py as an .npz file.

make_tiny_npz.py OUT.npz [--channels C] [--compressed]: train_images
[12, 4, 4] (or [12, C, 4, 4]) and test_images u8, train_labels and
test_labels i64: the pixels and labels of make_tiny_idx.py. With NumPy it
uses np.savez / np.savez_compressed; without, it writes the .npy members and
the zip archive by hand (the standard library's zipfile).
"""
import argparse
import struct
import zipfile

from make_tiny_idx import images


def npy_bytes(descr, shape, data):
    """A .npy file, version 1.0, padded as NumPy pads it."""
    dims = ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "")
    header = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (descr, dims)
    header += " " * (-(10 + len(header) + 1) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + data


def arrays(channels):
    result = {}
    for split, count, seed in (("train", 12, 1), ("test", 6, 2)):
        pixels, labels = images(count, seed)
        shape = (count, 4, 4) if channels is None else (count, channels, 4, 4)
        if channels is not None:  # every channel of image i is image i
            pixels = b"".join(bytes(pixels[i * 16:(i + 1) * 16]) * channels
                              for i in range(count))
        result[split + "_images"] = ("|u1", shape, bytes(pixels))
        result[split + "_labels"] = ("<i8", (count,), struct.pack("<%dq" % count, *labels))
    return result


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--channels", type=int)
    parser.add_argument("--compressed", action="store_true")
    args = parser.parse_args()
    data = arrays(args.channels)
    try:
        import numpy as np
    except ImportError:
        np = None
    if np is not None:
        loaded = {name: np.frombuffer(raw, dtype=np.dtype(descr)).reshape(shape)
                  for name, (descr, shape, raw) in data.items()}
        (np.savez_compressed if args.compressed else np.savez)(args.out, **loaded)
        return
    method = zipfile.ZIP_DEFLATED if args.compressed else zipfile.ZIP_STORED
    with zipfile.ZipFile(args.out, "w", method) as archive:
        for name, (descr, shape, raw) in data.items():
            archive.writestr(name + ".npy", npy_bytes(descr, shape, raw))


if __name__ == "__main__":
    main()
